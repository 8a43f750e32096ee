"""How long reading a CUPTI buffer's records takes, in bulk (measure/trace_records.py) against
field by field, with cupti-python's own record objects over a buffer laid out as CUPTI's (an API
record then a kernel record per launch). Needs the binding importable (cupti-python and
cuda-bindings, no GPU and no driver: the records are built here, not traced):

    python3 tools/trace_records_bench.py [LAUNCHES]   (20,000 by default)
"""
from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time
import types

import numpy as np


def main(n: int) -> None:
    from cupti import cupti

    from pytest_gemm.measure.trace_records import keep, one_by_one

    kd, ad = cupti.activity_kernel10_dtype, cupti.activity_api_dtype
    name = ctypes.create_string_buffer(b"_Z13matmul_kernelPfS_S_iii")
    buf = np.zeros(n * (kd.itemsize + ad.itemsize), dtype=np.uint8)
    base, off, records = buf.ctypes.data, 0, []
    for i in range(n):
        for dtype, cls, fields in ((ad, cupti.ActivityAPI, {"kind": int(cupti.ActivityKind.RUNTIME)}),
                                   (kd, cupti.ActivityKernel10, {"kind": int(cupti.ActivityKind.CONCURRENT_KERNEL),
                                                                "grid_x": i % 7 + 1, "block_x": 256,
                                                                "end": i, "name": ctypes.addressof(name)})):
            row = np.zeros(1, dtype=dtype)
            row["correlation_id"], row["start"] = i + 1, 0
            for k, v in fields.items():
                row[k] = v
            buf[off:off + dtype.itemsize] = row.view(np.uint8)
            records.append(cls.from_ptr(base + off))
            off += dtype.itemsize
    kernel_kinds = (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.KERNEL)
    api_kinds = (cupti.ActivityKind.DRIVER, cupti.ActivityKind.RUNTIME)

    bulk = types.SimpleNamespace(kernels=[], api={}, api_records=0)
    t0 = time.perf_counter()
    keep(cupti, records, kernel_kinds, api_kinds, bulk)
    t1 = time.perf_counter()
    each = types.SimpleNamespace(kernels=[], api={}, api_records=0)
    one_by_one(records, tuple(map(int, kernel_kinds)), tuple(map(int, api_kinds)), each)
    t2 = time.perf_counter()
    same = (bulk.kernels, bulk.api, bulk.api_records) == (each.kernels, each.api, each.api_records)
    print(f"{n} launches: in bulk {(t1 - t0) / n * 1e6:.1f} us a launch, field by field {(t2 - t1) / n * 1e6:.1f} us "
          f"a launch; same launches and API records: {same}")
    sys.stdout.flush()
    os._exit(0)  # the record objects, freed, would ask the binding's buffer manager for a buffer it never gave


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("launches", nargs="?", type=int, default=20000, help="launches in the buffer (20000)")
    main(parser.parse_args().launches)
