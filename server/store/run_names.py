"""A run's name when it is renamed: the checks `POST /runs` applies to a new one (the API's
schema and the dashboard's rename both end here, in `Store.update_run`)."""

from __future__ import annotations

from scalewatch.server import limits
from scalewatch.server.store.base import InvalidName, NameTaken

__all__ = ["InvalidName", "NameTaken", "check_run_name"]


def check_run_name(name: object) -> str:
    if not isinstance(name, str):
        raise InvalidName("a run's name must be text")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidName("names must be valid UTF-8") from None
    if "\x00" in name:
        raise InvalidName("names must not contain NUL characters")
    if not name.strip():
        raise InvalidName("names must not be blank")
    if len(name) > limits.MAX_NAME_LENGTH:
        raise InvalidName(f"names are at most {limits.MAX_NAME_LENGTH} characters")
    return name
