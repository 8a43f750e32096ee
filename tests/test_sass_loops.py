"""bench/sass_loops.py, with no GPU and no nvdisasm: its reading of nvdisasm's output (loops,
moved accumulators, reuse flags, the order of instructions, the stall cycles of the control words)
on SASS written here."""
from __future__ import annotations

from pathlib import Path

import pytest

from suite_helpers import load_registered

ROOT = Path(__file__).resolve().parent.parent
sass_loops = load_registered(ROOT / "bench" / "sass_loops.py", "gemm_tools_sass_loops")

# The shape of nvdisasm -c output: a prologue, a K loop with a spin wait inside it (a backward
# branch with no HMMA, not a tensor loop), four HMMA (the last one predicated) of which one moves
# its accumulator (D != C) and three carry a reuse flag, an mbarrier's initialisation, one copy
# (LDGSTS, predicated) and the copies' arrival on an mbarrier (no copy), a forward branch, and the
# loop's branch back to .L_x_1.
SASS = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/               @P0 BRA `(.L_x_3) ;
.L_x_1:
        /*0020*/                   LDSM.16.M88.4 R20, [R2] ;
        /*0030*/                   HMMA.16816.F32 R4, R20.reuse, R24, R4 ;
.L_x_2:
        /*0040*/                   SYNCS.PHASECHK.TRANS64 P1, [R3], RZ ;
        /*0044*/                   SYNCS.EXCH.64 URZ, [UR4], UR6 ;
        /*0050*/              @!P1 BRA `(.L_x_2) ;
        /*0060*/                   HMMA.16816.F32 R8, R20.reuse, R26, R8 ;
        /*0070*/              @!P4 LDGSTS.E.BYPASS.128 [R5], desc[UR4][R6.64] ;
        /*0080*/                   HMMA.16816.F32 R40, R20.reuse, R28, R12 ;
        /*0090*/               @P3 HMMA.16816.F32 R16, R20, R30, R16 ;
        /*0098*/                   ARRIVES.LDGSTSBAR.64.ARVCNT [URZ+0x24000] ;
        /*00a0*/               @P2 BRA `(.L_x_1) ;
.L_x_3:
        /*00b0*/                   EXIT ;
"""


def test_a_tensor_loop_is_found_and_counted():
    loops = sass_loops.tensor_loops(SASS, min_hmma=4)
    assert len(loops) == 1  # the spin wait is a loop with no HMMA; the first branch goes forward
    loop = loops[0]
    assert (loop.start, loop.end) == (0x20, 0xA0)
    assert len(loop.instructions) == 11 and len(loop.hmma) == 4
    assert loop.moved_accumulators == 1  # R40 <- ... R12
    assert loop.reused == 3
    assert loop.count("LDSM") == 1 and loop.count("LDGSTS") == 1
    assert loop.shape() == "LHW.BHGHHAB"
    assert loop.summary() == ("loop 0x20-0xa0: 11 instructions, 4 HMMA (2.75 a HMMA), 1 LDSM, 1 LDGSTS, "
                              "D != C 1, reuse 3 (75 %)")


def test_loops_with_fewer_hmma_than_asked_for_are_left_out():
    assert sass_loops.tensor_loops(SASS, min_hmma=5) == []
    assert sass_loops.tensor_loops(SASS.replace("HMMA", "FFMA"), min_hmma=1) == []


def test_without_nvdisasm_it_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.delenv("NVDISASM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    with pytest.raises(SystemExit, match="nvdisasm not found.*pip download --no-deps nvidia-cuda-nvdisasm"):
        sass_loops.nvdisasm()


def test_it_asks_for_something_to_read(capsys):
    with pytest.raises(SystemExit):
        sass_loops.main([])
    assert "give a cubin or --kernel NAME" in capsys.readouterr().err


def test_an_unknown_kernel_name_lists_the_names_there_are(tmp_path):
    with pytest.raises(SystemExit, match=r"--kernel mma-fp17: no rung or candidate of that name; rungs: .*mma-fp16.*"
                                         r"candidates: .*mma-fp16-256x128x64-s3-cs3"):
        sass_loops.compiled_cubin("mma-fp17", "sm_90", tmp_path)


def _hex(address: int, text: str, stall: int) -> str:
    """One instruction as nvdisasm -c -hex prints it: the first 64-bit word on its line, the second
    (stall count in its bits 41-44, the other control bits set to show they are ignored) below."""
    control = (stall << 41) | (0x1 << 45) | (0x7 << 46) | 0xF00
    return (f"        /*{address:04x}*/                   {text} ;   /* 0x000000ff00047a02 */\n"
            f"                                                                 /* 0x{control:016x} */\n")


# A loop of three HMMA: 6 cycles to the second (the floor), 7 to the third through an IMAD, and
# 1 + 8 + 15 = 24 from the third round the branch back to the first (ptxas waiting for the HMMA in
# flight before a branch): 37 cycles, 1 + 18 = 19 over the floor of 6 a HMMA, in two gaps.
HEX_SASS = (".L_x_7:\n" + _hex(0x10, "HMMA.16816.F32 R4, R20.reuse, R24, R4", 6)
            + _hex(0x20, "HMMA.16816.F32 R8, R20.reuse, R26, R8", 5) + _hex(0x30, "IMAD R2, R2, 0x4, R3", 2)
            + _hex(0x40, "HMMA.16816.F32 R12, R20, R28, R12", 1) + _hex(0x50, "NOP", 8)
            + _hex(0x60, "@P0 BRA `(.L_x_7)", 15))


def test_the_control_words_give_each_instructions_stall_cycles():
    assert sass_loops.stall_cycles(0x000fe40000000f00) == 2  # a control word ptxas writes: stall 2, yield
    loop, = sass_loops.tensor_loops(HEX_SASS, min_hmma=3)
    assert loop.stalls == [6, 5, 2, 1, 8, 15] and loop.stall_cycles == 37
    assert [cycles for cycles, _ in loop.gaps()] == [7, 24]
    assert [sass_loops.mnemonic(t) for t in loop.gaps()[1][1]] == ["HMMA.16816.F32", "NOP", "BRA"]
    assert loop.over_floor() == 19 and loop.over_floor(floor=7) == 17
    assert loop.summary().endswith("stall cycles 37 (12.33 a HMMA; 19 over 6 a HMMA)")


def test_without_control_words_there_are_no_stall_figures():
    loop, = sass_loops.tensor_loops(SASS, min_hmma=4)
    assert loop.stalls is None and loop.stall_cycles is None and loop.gaps() == [] and loop.over_floor() == 0
    assert "stall cycles" not in loop.summary()
