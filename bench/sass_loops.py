#!/usr/bin/env python3
"""What each tensor-core loop of a cubin issues, read from its SASS with no GPU.

    python3 bench/sass_loops.py --kernel mma-fp16 [--arch sm_90]      # a rung or candidate, compiled here
    python3 bench/sass_loops.py build/128x256x32_s4.cubin             # any cubin (nvcc -cubin)

For every loop (a backward branch) holding at least --min-hmma mma.sync instructions (HMMA): its
instructions, HMMA, ldmatrix (LDSM), cp.async (LDGSTS), the HMMA that write their accumulator
into another register than the one they read ("D != C": the register allocator moving
accumulators, a sign of pressure) and those with an operand-reuse flag (an operand read from the
reuse cache, not the register file), then the loop's order of instructions in one line (H: HMMA,
L: LDSM, G: LDGSTS, A: an arrival on an mbarrier, W: a wait or barrier, B: a branch, .: anything
else). bench/NOTES.md ("The profile, taken") compares the mma-fp16 rung with
CUTLASS's loop this way.

With the control words (nvdisasm -hex, which this tool asks for) it also adds up each loop's
encoded stall cycles: the cycles ptxas makes the warp wait after each instruction, the "wait"
stall that Nsight Compute samples. Between two HMMA.16816.F32 a warp waits at least 6 cycles on
sm_90, so a loop's cycles above 6 a HMMA are what its other work costs it, and every branch among
HMMA costs about 24 (ptxas waits for the HMMA in flight first): "gaps" lists the HMMA-to-HMMA
gaps above the floor with what fills them (NOTES.md, "Issue 29, fourth").

Needs nvdisasm: PATH, $NVDISASM, or CUDA's bin folder; without a CUDA toolkit,
``pip download --no-deps nvidia-cuda-nvdisasm`` and unzip it (CONTRIBUTING.md).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for folder in (REPO, REPO / "bench"):  # the project, and perf_candidates beside this file
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]+)\*/\s+(.*?)\s*;")
HEX = re.compile(r"/\*\s*(0x[0-9a-f]{16})\s*\*/\s*$")
HMMA_FLOOR = 6  # cycles from one HMMA.16816.F32 to the next of the same warp on sm_90 (ptxas's minimum)
LABEL = re.compile(r"^\s*(\.L_x_\d+):")
SHAPE = {"HMMA": "H", "LDSM": "L", "LDGSTS": "G", "ARRIVES": "A", "SYNCS.ARRIVE": "A", "SYNCS.PHASECHK": "W",
         "BAR": "W", "DEPBAR": "W", "BRA": "B"}


def _words(instruction: str) -> list[str]:
    """The instruction without its predicate (``@!P1``)."""
    return instruction.split(None, 2)[1:] if instruction.startswith("@") else instruction.split(None, 1)


def mnemonic(instruction: str) -> str:
    """``@!P1 LDGSTS.E.BYPASS.128 [R5], ...`` -> ``LDGSTS.E.BYPASS.128``."""
    words = _words(instruction)
    return words[0] if words else ""


def opcode(instruction: str) -> str:
    """``LDGSTS.E.BYPASS.128 ...`` -> ``LDGSTS`` (``ARRIVES.LDGSTSBAR...`` is no copy)."""
    return mnemonic(instruction).split(".")[0]


def operands(instruction: str) -> list[str]:
    words = _words(instruction)
    return [o.strip().replace(".reuse", "") for o in words[1].split(",")] if len(words) > 1 else []


def letter(instruction: str) -> str:
    parts = mnemonic(instruction).split(".")
    return SHAPE.get(".".join(parts[:2]), SHAPE.get(parts[0], "."))


def stall_cycles(control: int) -> int:
    """The stall count of a Volta+ instruction: bits 105-108 of the 128-bit word, i.e. bits 41-44
    of its second (high) 64-bit word as nvdisasm -hex prints it."""
    return (control >> 41) & 0xF


@dataclass(frozen=True)
class Loop:
    start: int
    end: int
    instructions: list[str]
    stalls: list[int] | None = None  # each instruction's stall cycles, when read with -hex

    @property
    def stall_cycles(self) -> int | None:
        return sum(self.stalls) if self.stalls is not None else None

    def gaps(self, floor: int = HMMA_FLOOR) -> list[tuple[int, list[str]]]:
        """The loop's HMMA-to-HMMA gaps longer than ``floor`` cycles, walked around the loop (the
        last HMMA's gap runs through the branch back to the first): (cycles, the instructions)."""
        if self.stalls is None:
            return []
        marks = [i for i, text in enumerate(self.instructions) if opcode(text) == "HMMA"]
        found = []
        for here, after in zip(marks, marks[1:] + [marks[0] + len(self.instructions)]):
            span = [j % len(self.instructions) for j in range(here, after)]
            cycles = sum(self.stalls[j] for j in span)
            if cycles > floor:
                found.append((cycles, [self.instructions[j] for j in span]))
        return found

    def over_floor(self, floor: int = HMMA_FLOOR) -> int:
        """Cycles the loop's encoded stalls add to ``floor`` a HMMA."""
        return sum(cycles - floor for cycles, _ in self.gaps(floor))

    @property
    def hmma(self) -> list[str]:
        return [i for i in self.instructions if opcode(i) == "HMMA"]

    @property
    def moved_accumulators(self) -> int:
        """HMMA whose destination differs from their accumulator input (D != C)."""
        return sum(operands(i)[0] != operands(i)[3] for i in self.hmma)

    @property
    def reused(self) -> int:
        return sum(".reuse" in i for i in self.hmma)

    def count(self, name: str) -> int:
        return sum(opcode(i) == name for i in self.instructions)

    def shape(self) -> str:
        return "".join(letter(i) for i in self.instructions)

    def summary(self) -> str:
        h = len(self.hmma)
        text = (f"loop {self.start:#x}-{self.end:#x}: {len(self.instructions)} instructions, {h} HMMA "
                f"({len(self.instructions) / h:.2f} a HMMA), {self.count('LDSM')} LDSM, "
                f"{self.count('LDGSTS')} LDGSTS, D != C {self.moved_accumulators}, "
                f"reuse {self.reused} ({100 * self.reused / h:.0f} %)")
        if self.stalls is not None:
            text += (f", stall cycles {self.stall_cycles} ({self.stall_cycles / h:.2f} a HMMA; "
                     f"{self.over_floor()} over {HMMA_FLOOR} a HMMA)")
        return text


def tensor_loops(sass: str, min_hmma: int = 32) -> list[Loop]:
    """The loops of nvdisasm's output (a branch back to a label above it) with >= min_hmma HMMA."""
    instructions: list[tuple[int, str, int | None]] = []
    labels: dict[str, int] = {}
    waiting: list[str] = []  # labels whose address is the next instruction's
    lines = sass.splitlines()
    for number, line in enumerate(lines):
        label = LABEL.match(line)
        if label:
            waiting.append(label[1])
            continue
        found = INSTRUCTION.match(line)
        if found:
            address = int(found[1], 16)
            # -hex: the first 64-bit word ends this line, the second (with the control bits) is the next
            control = HEX.search(lines[number + 1]) if HEX.search(line) and number + 1 < len(lines) else None
            stall = stall_cycles(int(control[1], 16)) if control else None
            instructions.append((address, found[2], stall))
            labels.update((name, address) for name in waiting)
            waiting = []
    loops = []
    for address, text, _ in instructions:
        target = re.search(r"BRA\b.*?(\.L_x_\d+)", text)
        if target and labels.get(target[1], address + 1) <= address:
            start = labels[target[1]]
            body = [(t, stall) for a, t, stall in instructions if start <= a <= address]
            if sum(opcode(t) == "HMMA" for t, _ in body) >= min_hmma:
                known = [stall for _, stall in body if stall is not None]  # all, when read with -hex
                loops.append(Loop(start, address, [t for t, _ in body], known if len(known) == len(body) else None))
    return loops


def nvdisasm() -> str:
    for candidate in (os.environ.get("NVDISASM"), shutil.which("nvdisasm"),
                      os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvdisasm")):
        if candidate and os.path.isfile(candidate):
            return candidate
    raise SystemExit("nvdisasm not found: put CUDA's bin folder on PATH or set NVDISASM=/path/to/nvdisasm "
                     "(with no toolkit: pip download --no-deps nvidia-cuda-nvdisasm, then unzip the wheel)")


def disassemble(cubin: Path) -> str:
    done = subprocess.run([nvdisasm(), "-c", "-hex", str(cubin)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"nvdisasm failed on {cubin}: {done.stderr.strip()[:300]}")
    return done.stdout


def compiled_cubin(name: str, arch: str, folder: Path) -> tuple[Path, str]:
    """A ladder rung or candidate compiled for ``arch`` here (NVRTC), and its registers."""
    from pytest_gemm.kernels.compiler import compile_for_arch
    from reference_kernels import LADDER
    from bench.candidates import CANDIDATES
    from perf_candidates import kernel_by_name  # the lookup bench/profile_kernel.py uses too

    try:
        kernel = kernel_by_name(name)
    except KeyError:
        rungs = ", ".join(sorted(str(k.name) for k in LADDER))
        raise SystemExit(f"--kernel {name}: no rung or candidate of that name; rungs: {rungs}; "
                         f"candidates: {', '.join(sorted(CANDIDATES))}") from None
    built = compile_for_arch(kernel, arch)
    path = folder / f"{name}.{arch}.cubin"
    path.write_bytes(built.code)
    registers = built.resources.registers if built.resources else "?"
    return path, f"{name} for {arch}: {registers} registers"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("cubins", nargs="*", type=Path, help="cubin files")
    p.add_argument("--kernel", action="append", default=[], help="a rung or candidate by name (repeatable)")
    p.add_argument("--arch", default="sm_90", help="the architecture --kernel is compiled for (default sm_90)")
    p.add_argument("--min-hmma", type=int, default=32, help="loops with fewer HMMA are left out (default 32)")
    p.add_argument("--gaps", action="store_true",
                   help=f"also list each HMMA-to-HMMA gap above {HMMA_FLOOR} stall cycles and what fills it")
    args = p.parse_args(argv)
    if not args.cubins and not args.kernel:
        p.error("give a cubin or --kernel NAME")
    with tempfile.TemporaryDirectory() as tmp:
        targets = [(c, str(c)) for c in args.cubins]
        targets += [compiled_cubin(name, args.arch, Path(tmp)) for name in args.kernel]
        for cubin, title in targets:
            print(title)
            loops = tensor_loops(disassemble(cubin), args.min_hmma)
            for loop in loops:
                print("  " + loop.summary())
                print("    " + loop.shape())
                for cycles, between in loop.gaps() if args.gaps else []:
                    print(f"    gap {cycles}: " + "; ".join(mnemonic(t) for t in between))
            if not loops:
                print(f"  no loop with {args.min_hmma} or more HMMA")
    return 0


if __name__ == "__main__":
    sys.exit(main())
