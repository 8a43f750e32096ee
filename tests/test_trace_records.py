"""measure/trace_records.py: a CUPTI buffer's records read in bulk through the binding's dtypes,
against stand-in records laid out in a numpy buffer as CUPTI lays them (kernel and API records
interleaved), with no GPU and no CUPTI."""
from __future__ import annotations

import ctypes
import types

import numpy as np
import pytest

from pytest_gemm.measure.trace_records import dtype_of, keep

KERNEL_KINDS, API_KINDS = (10, 3), (5, 4)  # CONCURRENT_KERNEL, KERNEL; DRIVER, RUNTIME
MEMCPY = 1

# Laid out like cupti-python's activity_kernel10_dtype and activity_api_dtype (fewer fields)
KERNEL_DTYPE = np.dtype({"names": ["kind", "registers_per_thread", "start", "end", "stream_id", "grid_x", "grid_y",
                                   "grid_z", "block_x", "block_y", "block_z", "static_shared_memory",
                                   "dynamic_shared_memory", "correlation_id", "name"],
                         "formats": ["<i4", "<u2", "<u8", "<u8", "<u4", "<i4", "<i4", "<i4", "<i4", "<i4", "<i4",
                                     "<i4", "<i4", "<u4", "<u8"],
                         "offsets": [0, 4, 8, 16, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60, 64], "itemsize": 72})
API_DTYPE = np.dtype({"names": ["kind", "cbid", "start", "end", "process_id", "thread_id", "correlation_id",
                                "return_value"],
                      "formats": ["<i4", "<u4", "<u8", "<u8", "<u4", "<u4", "<u4", "<u4"],
                      "offsets": [0, 4, 8, 16, 24, 28, 32, 36], "itemsize": 40})
NAMES = [ctypes.create_string_buffer(b"_Z13matmul_kernelPfS_S_iii"), ctypes.create_string_buffer(b"triton_mm")]


class _Record:
    """A record as the binding hands it: its address in the buffer, and its fields as attributes
    (which ``strict`` makes fail: the bulk reading must not touch them)."""

    strict = False

    def __init__(self, ptr: int, fields: dict):
        self.ptr, self._fields = ptr, fields

    def __getattr__(self, name):
        if self.strict:
            raise AssertionError(f"read attribute by attribute: {name}")
        return self._fields[name]


class ActivityKernel10(_Record):
    pass


class ActivityAPI(_Record):
    pass


class ActivityKernel11(_Record):  # a record type this binding has no dtype for
    pass


def _buffer(n: int, kernel_type: type = ActivityKernel10, extra_memcpy: bool = False):
    """n launches, each an API record then its kernel record, in one buffer; the records."""
    size = n * (API_DTYPE.itemsize + KERNEL_DTYPE.itemsize) + API_DTYPE.itemsize
    buf = np.zeros(size, dtype=np.uint8)
    base, off, records = buf.ctypes.data, 0, []

    def put(dtype, cls, fields):
        nonlocal off
        row = np.zeros(1, dtype=dtype)
        for k, v in fields.items():
            row[k] = ctypes.addressof(v) if k == "name" else v  # the record holds its name's address
        buf[off:off + dtype.itemsize] = row.view(np.uint8)
        records.append(cls(base + off, {**fields, **({"name": fields["name"].value.decode()} if "name" in fields else {})}))
        off += dtype.itemsize

    for i in range(n):
        put(API_DTYPE, ActivityAPI, {"kind": API_KINDS[i % 2], "correlation_id": i + 1, "start": 100 * i + 3})
        put(KERNEL_DTYPE, kernel_type, {
            "kind": KERNEL_KINDS[i % 2], "grid_x": i % 5 + 1, "grid_y": 2, "grid_z": 1, "block_x": 128, "block_y": 1,
            "block_z": 1, "registers_per_thread": 96, "static_shared_memory": 16, "dynamic_shared_memory": 49152,
            "start": 100 * i + 10, "end": 100 * i + 10 + i, "stream_id": 7, "correlation_id": i + 1,
            "name": NAMES[i % 2]})
    if extra_memcpy:
        put(API_DTYPE, ActivityAPI, {"kind": MEMCPY, "correlation_id": 999, "start": 1})
    return buf, records


def _kept(binding, records):
    into = types.SimpleNamespace(kernels=[], api={}, api_records=0)
    keep(binding, records, KERNEL_KINDS, API_KINDS, into)
    return into


BINDING = types.SimpleNamespace(activity_kernel10_dtype=KERNEL_DTYPE, activity_api_dtype=API_DTYPE)
NO_DTYPES = types.SimpleNamespace()


def test_records_are_read_in_bulk_and_say_what_their_attributes_say(monkeypatch):
    buf, records = _buffer(50, extra_memcpy=True)
    by_attribute = _kept(NO_DTYPES, records)
    monkeypatch.setattr(_Record, "strict", True)
    in_bulk = _kept(BINDING, records)
    assert len(in_bulk.kernels) == 50 and in_bulk.api_records == 50  # the memcpy record is neither
    assert in_bulk.kernels == by_attribute.kernels
    assert in_bulk.api == by_attribute.api == {i + 1: 100 * i + 3 for i in range(50)}
    k = in_bulk.kernels[3]
    assert (k.grid, k.block, k.registers, k.static_shared, k.dynamic_shared) == ((4, 2, 1), (128, 1, 1), 96, 16, 49152)
    assert (k.start_ns, k.end_ns, k.stream, k.correlation, k.call) == (310, 313, 7, 4, None)
    assert k.name == "triton_mm" and in_bulk.kernels[0].name.startswith("matmul_kernel")  # demangled
    assert all(type(v) is int for v in (*k.grid, k.start_ns, k.correlation))


def test_a_record_type_with_no_dtype_here_is_read_attribute_by_attribute(monkeypatch):
    buf, records = _buffer(6, kernel_type=ActivityKernel11)
    kept = _kept(BINDING, records)
    assert len(kept.kernels) == 6 and kept.api_records == 6
    monkeypatch.setattr(_Record, "strict", True)
    with pytest.raises(AssertionError, match="attribute by attribute"):
        _kept(BINDING, records)  # the kernel records have no dtype: their attributes are read


def test_a_dtype_without_a_field_a_launch_needs_is_not_used(monkeypatch):
    buf, records = _buffer(4)
    fewer = np.dtype({"names": [n for n in KERNEL_DTYPE.names if n != "stream_id"],
                      "formats": [KERNEL_DTYPE.fields[n][0] for n in KERNEL_DTYPE.names if n != "stream_id"],
                      "offsets": [KERNEL_DTYPE.fields[n][1] for n in KERNEL_DTYPE.names if n != "stream_id"],
                      "itemsize": KERNEL_DTYPE.itemsize})
    binding = types.SimpleNamespace(activity_kernel10_dtype=fewer, activity_api_dtype=API_DTYPE)
    assert _kept(binding, records).kernels == _kept(NO_DTYPES, records).kernels
    monkeypatch.setattr(_Record, "strict", True)
    with pytest.raises(AssertionError, match="stream_id|kind|name|grid"):
        _kept(binding, records)


@pytest.mark.parametrize("name, dtype", [("ActivityKernel10", "activity_kernel10_dtype"),
                                         ("ActivityAPI", "activity_api_dtype"),
                                         ("ActivityMemoryPool2", "activity_memory_pool2_dtype")])
def test_the_binding_dtype_is_found_by_the_record_class_name(name, dtype):
    marker = np.dtype([("kind", "<i4")])
    assert dtype_of(types.SimpleNamespace(**{dtype: marker}), type(name, (), {})) is marker
    assert dtype_of(types.SimpleNamespace(), type(name, (), {})) is None
    assert dtype_of(types.SimpleNamespace(**{dtype: marker}), type("Other", (), {})) is None
