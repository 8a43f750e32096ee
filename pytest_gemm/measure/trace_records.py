"""The records of one CUPTI buffer, read in bulk: what ``measure/trace.py``'s buffer-completed
callback keeps of them (kernel records as ``Launch``es, launch API records as correlation id ->
host start).

cupti-python hands the callback one object per record, a view of the record in CUPTI's buffer
(its address is ``ptr``) whose fields are numpy reads one attribute at a time: about 3.4 us a
field, 43 us a kernel record for the 14 fields a ``Launch`` keeps (the binding's own
``ActivityKernel10`` over a buffer of records, offline). An autotuner's search brings 20,000 to
33,000 launches to one check (Triton's tutorial matmul), each with its launch's API record: 3.4 to
9.4 s of reading a check on an H100 at 72e5cd6. Here each record's address is read once, the
bytes of the records of one type are copied into one array of the binding's own dtype for that
type (``activity_kernel10_dtype`` for ``ActivityKernel10``, ``activity_api_dtype`` for
``ActivityAPI``), and every field is read as a column. A record type the binding has no dtype for
(another version) is read attribute by attribute, as before. Pure but for reading memory at the
records' addresses; tested with stand-in records over a numpy buffer (tests/test_trace_records.py).
"""
from __future__ import annotations

import ctypes
import re
from typing import Any, Iterable

from ..judges.launches import Launch, demangle, launch_from_activity

# The fields a Launch is made of, as CUPTI's kernel record names them
KERNEL_FIELDS = ("name", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread",
                 "static_shared_memory", "dynamic_shared_memory", "start", "end", "stream_id", "correlation_id", "kind")
API_FIELDS = ("correlation_id", "start", "kind")


def dtype_of(binding: Any, record_type: type) -> Any:
    """The binding's numpy dtype for a record class (``ActivityKernel10`` ->
    ``activity_kernel10_dtype``), or None."""
    name = record_type.__name__
    if not name.startswith("Activity"):
        return None
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name[len("Activity"):]).lower()
    return getattr(binding, f"activity_{snake}_dtype", None)


def _columns(records: list[Any], dtype: Any, fields: tuple[str, ...]) -> dict[str, list[int]] | None:
    """The records' fields as columns, read from one copy of their bytes; None where the dtype
    lacks a field or a record has no address."""
    import numpy as np  # lazy: the harness imports this module in every kernel process

    names = getattr(dtype, "names", None) or ()
    if any(f not in names for f in fields):
        return None
    size = int(dtype.itemsize)
    try:
        addresses = [int(r.ptr) for r in records]
    except (AttributeError, TypeError, ValueError):
        return None
    if not addresses or 0 in addresses:
        return None
    table = np.frombuffer(b"".join(ctypes.string_at(a, size) for a in addresses), dtype=dtype)
    return {f: table[f].tolist() for f in fields}


def _name(address: int, names: dict[int, str]) -> str:
    """A kernel record's name (a C string CUPTI owns, alive while the buffer is), demangled."""
    if address not in names:
        raw = ctypes.string_at(address).decode("utf-8", "replace") if address else ""
        names[address] = demangle(raw)
    return names[address]


def keep(binding: Any, activities: Iterable[Any], kernel_kinds: tuple[int, ...], api_kinds: tuple[int, ...],
         into: Any) -> None:
    """Add a delivered buffer's kernel records to ``into.kernels`` (Launches) and its API records
    to ``into.api`` (correlation id -> host start), counting them in ``into.api_records`` (a
    ``Tracer``)."""
    kernel_kinds, api_kinds = tuple(map(int, kernel_kinds)), tuple(map(int, api_kinds))
    by_type: dict[type, list[Any]] = {}
    for a in activities:
        by_type.setdefault(type(a), []).append(a)
    names: dict[int, str] = {}
    for record_type, records in by_type.items():
        dtype = dtype_of(binding, record_type)
        cols = None
        if dtype is not None:
            fields = KERNEL_FIELDS if "grid_x" in (getattr(dtype, "names", None) or ()) else API_FIELDS
            cols = _columns(records, dtype, fields)
        if cols is None:
            one_by_one(records, kernel_kinds, api_kinds, into)
            continue
        for i, kind in enumerate(cols["kind"]):
            if kind in kernel_kinds and "grid_x" in cols:
                into.kernels.append(Launch(
                    name=_name(cols["name"][i], names),
                    grid=(cols["grid_x"][i], cols["grid_y"][i], cols["grid_z"][i]),
                    block=(cols["block_x"][i], cols["block_y"][i], cols["block_z"][i]),
                    registers=cols["registers_per_thread"][i], static_shared=cols["static_shared_memory"][i],
                    dynamic_shared=cols["dynamic_shared_memory"][i], start_ns=cols["start"][i],
                    end_ns=cols["end"][i], stream=cols["stream_id"][i], correlation=cols["correlation_id"][i]))
            elif kind in api_kinds:
                into.api[cols["correlation_id"][i]] = cols["start"][i]
                into.api_records += 1


def one_by_one(records: list[Any], kernel_kinds: tuple[int, ...], api_kinds: tuple[int, ...], into: Any) -> None:
    """Records of a type with no dtype here: each field an attribute read."""
    for a in records:
        kind = int(a.kind)
        if kind in kernel_kinds:
            into.kernels.append(launch_from_activity(a))
        elif kind in api_kinds:
            into.api[int(a.correlation_id)] = int(a.start)
            into.api_records += 1
