"""A W&B run's transaction log (``wandb/run-*/run-*.wandb``, also ``offline-run-*``), read
record by record while the trainer may still be writing it.

Every W&B run writes this file, online and offline: it is what ``wandb sync`` uploads.  Its
framing is LevelDB's log format with a 7-byte W&B header (``:W&B``, magic 0xBEE1, version 0):
32 KiB blocks of chunks, each ``<u32 crc32><u16 length><u8 type>`` + payload, a record being one
FULL chunk or FIRST, MIDDLE..., LAST; fewer than 7 bytes left in a block are zero padding.  The
checksum is the standard (IEEE) CRC-32 of the type byte and the payload.  The payloads are the
``wandb.proto.wandb_internal_pb2.Record`` protobufs, decoded with the ``wandb`` package's own
classes (the ``wandb`` extra).  wandb shipped a Python reader of the framing
(``wandb.sdk.internal.datastore``) until its Python internals were removed in favour of the Go
``wandb-core`` (wandb 0.31 has none; its reader is ``core/pkg/leveldb/record.go``), so the
framing is read here, with the standard library: it is small, documented and has not changed
since the format was introduced.

:func:`scan` returns the complete records from an offset and the offset after the last one: a
record still being written (a chunk past the end of the file, a FIRST without its LAST) is left
for the next call, so a follower saves only offsets of whole records.
"""

from __future__ import annotations

import json
import logging
import math
import os
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from trainer_client.limits import MAX_METRIC_NAME_LENGTH, MAX_STEP

logger = logging.getLogger("scalewatch.follow")

HEADER = struct.pack("<4sHB", b":W&B", 0xBEE1, 0)
BLOCK = 32 * 1024
CHUNK_HEADER = struct.Struct("<IHB")
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
READ_BYTES = 8 * 1024 * 1024  # per read; a record bigger than this is read in more steps
READ_BUDGET = 64 * 1024 * 1024  # per scan: a long log is taken a part at a time (memory)
# crc32 of each chunk type byte: the checksum continues from it over the payload.
_TYPE_CRC = {t: zlib.crc32(bytes([t])) for t in (FULL, FIRST, MIDDLE, LAST)}


class WandbLogError(Exception):
    """The file is not a W&B transaction log (or the wandb package is missing)."""


def _chunks(data: bytes, base: int, final: bool) -> Iterator[tuple[int, int, bytes]]:
    """(chunk type, file offset after the chunk, payload) of the whole chunks in ``data``
    (which starts at file offset ``base``). A damaged chunk in the middle of the file is
    skipped with the rest of its block, as LevelDB's reader does; one at the end is taken for
    a write in progress (unless ``final``) and ends the scan."""
    pos, end = base, base + len(data)
    while True:
        left_in_block = BLOCK - pos % BLOCK
        if left_in_block < CHUNK_HEADER.size:  # zero padding up to the next block
            if pos + left_in_block > end:
                return
            pos += left_in_block
            continue
        if pos + CHUNK_HEADER.size > end:
            return
        crc, length, kind = CHUNK_HEADER.unpack_from(data, pos - base)
        stop = pos + CHUNK_HEADER.size + length
        damaged = kind not in _TYPE_CRC or length + CHUNK_HEADER.size > left_in_block
        if not damaged and stop > end:
            return  # still being written
        payload = data[pos + CHUNK_HEADER.size - base : stop - base]
        if not damaged and zlib.crc32(payload, _TYPE_CRC[kind]) == crc:
            yield kind, stop, payload
            pos = stop
            continue
        next_block = pos + left_in_block
        if next_block >= end and not final:
            return  # a torn tail (or zeros not yet overwritten): read it again next time
        logger.warning("scalewatch follow: damaged W&B log chunk at offset %d; skipping to the "
                       "next block", pos)
        if next_block >= end:
            return
        yield 0, next_block, b""  # tells the caller to drop a half-assembled record
        pos = next_block


def scan(path: str | os.PathLike[str], offset: int = 0, final: bool = False,
         read_bytes: int = READ_BYTES, budget: int = READ_BUDGET) -> tuple[list[bytes], int]:
    """The complete records of ``path`` from ``offset`` on, and the offset just after the last
    one (where the next call starts); it stops once ``budget`` bytes were read past
    ``offset``. ``final``: the file is finished (an import), so a damaged tail is skipped
    instead of waited for."""
    with open(path, "rb") as f:
        if offset < len(HEADER):
            head = f.read(len(HEADER))
            if len(head) < len(HEADER):
                if final or (head and not HEADER.startswith(head)):
                    raise WandbLogError(f"{path} is not a W&B transaction log")
                return [], 0
            if head != HEADER and head[:-1] == HEADER[:-1]:  # another format version
                raise WandbLogError(f"{path} is a W&B log of format version {head[-1]}, which "
                                    "this scalewatch does not read (it reads version 0)")
            if head != HEADER:
                raise WandbLogError(f"{path} is not a W&B transaction log")
            offset = len(HEADER)
        records: list[bytes] = []
        start = offset
        while True:
            f.seek(offset)
            data = f.read(read_bytes)
            if not data:
                return records, offset
            parts: list[bytes] = []
            before = offset
            for kind, stop, payload in _chunks(data, offset, final and len(data) < read_bytes):
                if kind == FULL:
                    records.append(payload)
                    parts, offset = [], stop
                elif kind == FIRST:
                    parts = [payload]
                elif kind in (MIDDLE, LAST) and parts:
                    parts.append(payload)
                    if kind == LAST:
                        records.append(b"".join(parts))
                        parts, offset = [], stop
                elif kind == 0 or kind in (MIDDLE, LAST):  # damage, or an orphan continuation
                    parts, offset = [], stop
            if len(data) < read_bytes or (offset - start >= budget and records):
                return records, offset
            if offset == before:  # one record longer than the window: read more at once
                read_bytes *= 2


# --------------------------------------------------------------------------- records


def _record_class() -> Any:
    try:
        from wandb.proto import wandb_internal_pb2
    except ImportError as exc:
        raise WandbLogError(
            "reading W&B run files needs the wandb package:\n    pip install 'scalewatch[wandb]'"
        ) from exc
    return getattr(wandb_internal_pb2, "Record")  # noqa: B009 - generated, untyped for mypy


@dataclass
class RunInfo:
    """What a W&B run says about itself (its ``run`` and ``config`` records)."""

    run_id: str = ""
    project: str = ""
    entity: str = ""
    name: str = ""
    group: str = ""
    config: dict[str, Any] = field(default_factory=dict)


@dataclass
class Event:
    """One decoded record: ``kind`` is run, config, history or exit."""

    kind: str
    run: RunInfo | None = None
    config: dict[str, Any] | None = None
    removed: list[str] | None = None
    step: int | None = None
    metrics: dict[str, float] | None = None
    time: float | None = None
    exit_code: int = 0


def _item_key(item: Any) -> str:
    # wandb-core writes keys as nested_key (a one-element list for "a/b"); older clients `key`.
    nested = item.nested_key
    if len(nested) == 1:
        return str(nested[0])
    return item.key or ".".join(nested)


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _scalars(name: str, value: Any) -> Iterator[tuple[str, float]]:
    if isinstance(value, Mapping):
        if "_type" in value:  # media, histograms, tables: not scalars
            return
        for k, v in value.items():
            yield from _scalars(f"{name}.{k}", v)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        v = float(value)
        if math.isfinite(v) and 0 < len(name) <= MAX_METRIC_NAME_LENGTH and "\x00" not in name:
            yield name, v


def _config(update: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in update:
        key = _item_key(item)
        if key and key != "_wandb":
            out[key] = _json(item.value_json)
    return out


def decode(payload: bytes, record_class: Any = None) -> Event | None:
    """The event of one record, None for the kinds scalewatch does not use (summary, stats,
    telemetry, files, output, ...)."""
    rec = (record_class or _record_class())()
    try:
        rec.ParseFromString(payload)
    except Exception:  # noqa: BLE001 - protobuf's DecodeError; a record we cannot read is skipped
        logger.warning("scalewatch follow: a W&B record could not be decoded; skipped")
        return None
    kind = rec.WhichOneof("record_type")
    if kind == "run":
        r = rec.run
        return Event("run", run=RunInfo(r.run_id, r.project, r.entity, r.display_name,
                                        r.run_group, _config(r.config.update)))
    if kind == "config":
        return Event("config", config=_config(rec.config.update),
                     removed=[_item_key(i) for i in rec.config.remove])
    if kind == "exit":
        return Event("exit", exit_code=int(rec.exit.exit_code))
    if kind != "history":
        return None
    metrics: dict[str, float] = {}
    step: Any = rec.history.step.num if rec.history.HasField("step") else None
    t: Any = None
    for item in rec.history.item:
        key = _item_key(item)
        if key == "_step":
            step = _json(item.value_json)
        elif key == "_timestamp":
            t = _json(item.value_json)
        elif key and not key.startswith("_"):  # _runtime, _wandb: bookkeeping
            text = item.value_json
            try:  # the common case, a number: float() is ~10x cheaper than json.loads
                v = float(text)
            except ValueError:
                metrics.update(_scalars(key, _json(text)))
                continue
            if v - v == 0.0 and len(key) <= MAX_METRIC_NAME_LENGTH and "\x00" not in key:  # finite
                metrics[key] = v
    if isinstance(step, float) and step.is_integer():
        step = int(step)
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= MAX_STEP:
        return None
    ok_time = isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t)
    return Event("history", step=step, metrics=metrics, time=float(t) if ok_time else None)


def events(path: str | os.PathLike[str], offset: int = 0, final: bool = False
           ) -> tuple[list[Event], int]:
    """The decoded events of the complete records from ``offset`` on, and the next offset."""
    payloads, end = scan(path, offset, final)
    cls = _record_class() if payloads else None
    out = [e for e in (decode(p, cls) for p in payloads) if e is not None]
    return out, end
