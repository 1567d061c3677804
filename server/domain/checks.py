"""The checks every write shares, whoever makes it (the REST API's request models, the MLflow
API, the dashboard's forms): text that can be stored and sent back, bounded JSON, tags, groups,
priors. Raised as `ValueError`, which pydantic turns into a 422 and the dashboard into a
message."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError, field_validator

from scalewatch.server import limits
from scalewatch.server.fitting.b_prior import check_b_prior
from scalewatch.server.fitting.model import value_range_problem
from scalewatch.server.fitting.noise_prior import check_rho_prior


def parse_id(text: str) -> int | None:
    """The id ``text`` spells in ASCII digits within the 32-bit id range (``limits.MAX_ID``),
    else None. Not ``str.isdigit`` alone: "²" is a digit to it and ``int("²")`` raises (a
    500), and ``int("١")`` is 1 (an alias of id 1)."""
    if not (text.isascii() and text.isdigit()) or len(text) > 10 or int(text) > limits.MAX_ID:
        return None
    return int(text)


def utf8_problem(text: str) -> bool:
    """True when `text` cannot be sent back as UTF-8 (a lone surrogate such as "\\udfff", which
    JSON escapes can carry): stored, it would turn every later response that shows it into a
    500, so it is refused on the way in."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check_utf8(text: str, what: str) -> str:
    if utf8_problem(text):
        raise ValueError(f"{what} must be valid UTF-8 text (no lone surrogates)")
    return text


def clean_text(text: str, what: str) -> str:
    check_utf8(text, what)
    # PostgreSQL text cannot hold NUL; reject it up front instead of failing at INSERT time.
    if "\x00" in text:
        raise ValueError(f"{what} must not contain NUL characters")
    if not text.strip():
        raise ValueError(f"{what} must not be blank")
    return text


def check_json(value: dict[str, Any], what: str) -> dict[str, Any]:
    try:
        encoded = json.dumps(value, allow_nan=False)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{what} must be JSON without NaN or Infinity ({exc})") from exc
    # json.dumps escapes lone surrogates ("\\udfff") instead of failing: encode without the
    # escaping to find them (keys and values, at any depth).
    if utf8_problem(json.dumps(value, ensure_ascii=False)):
        raise ValueError(f"{what} must be valid UTF-8 text (no lone surrogates)")
    if "\\u0000" in encoded:
        raise ValueError(f"{what} must not contain NUL characters")
    if len(encoded) > limits.MAX_CONFIG_BYTES:
        raise ValueError(f"{what} is larger than {limits.MAX_CONFIG_BYTES} bytes")
    return value


def check_free_text(text: str | None, what: str) -> str | None:
    """Text a person types (notes, a secret): anything, blank too, but valid UTF-8 without NUL
    (PostgreSQL text cannot hold NUL: a clear 422 instead of a failed INSERT)."""
    if text is not None:
        check_utf8(text, what)
        if "\x00" in text:
            raise ValueError(f"{what} must not contain NUL characters")
    return text


def check_group(v: str | None) -> str | None:
    return None if v is None else clean_text(v, "group")


def check_tags(tags: list[str] | None) -> list[str] | None:
    if tags is None:
        return None
    if len(tags) > limits.MAX_TAGS:
        raise ValueError(f"at most {limits.MAX_TAGS} tags")
    for t in tags:
        if len(t) > limits.MAX_TAG_LENGTH:
            raise ValueError(f"tag longer than {limits.MAX_TAG_LENGTH} characters")
        clean_text(t, "tags")
    return tags


class PriorsChecked(BaseModel):
    """A model with prior fields (``noise_prior``, ``b_prior``: "project", [a, b] or null)
    checks the explicit ones here, once for every model that has them."""

    @field_validator("noise_prior", check_fields=False)
    @classmethod
    def _noise_prior(cls, v: Any) -> Any:
        """A prior on the noise's AR(1) coefficient: [mean in 0..0.98, sd in (0, 1]]."""
        if isinstance(v, (list, tuple)):
            check_rho_prior(*v)
        return v

    @field_validator("b_prior", check_fields=False)
    @classmethod
    def _b_prior(cls, v: Any) -> Any:
        """A t prior on ln B: [centre of ln B, scale in (0, 5]]."""
        if isinstance(v, (list, tuple)):
            check_b_prior(*v)
        return v


def loc_text(loc: Sequence[Any]) -> str:
    """("body", "points", 3, "compute") -> "points[3].compute"; query/path keep their prefix."""
    parts = list(loc)
    if parts and parts[0] == "body":
        parts = parts[1:]
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "body"


def field_errors(exc: ValidationError) -> list[dict[str, str]]:
    """A validation failure as the REST API answers it (`errors` of a 422: each field's
    location and message), so a write refused elsewhere (the dashboard) says the same."""
    return [{"loc": loc_text(e.get("loc", ())), "msg": str(e.get("msg", ""))}
            for e in exc.errors()]


def check_value_range(v: tuple[float, float] | None) -> tuple[float, float] | None:
    """A run's (or a fit request's) value range: what the fit takes (low < high, a width in
    the span its thresholds scale over: ``fitting.model.value_range_problem``, whose span is
    ``limits.VALUE_RANGE_WIDTH``), with its ends within ``limits.VALUE_RANGE_LIMIT``
    (``trainer_client.validation`` checks the same)."""
    if v is None:
        return v
    problem = value_range_problem(v)
    if problem:
        raise ValueError(problem)
    lo, hi = v
    if max(abs(lo), abs(hi)) > limits.VALUE_RANGE_LIMIT:
        raise ValueError(f"value_range's ends must lie within +-{limits.VALUE_RANGE_LIMIT:g}")
    return v
