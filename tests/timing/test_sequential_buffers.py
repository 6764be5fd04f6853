"""Compiler rule sequential_buffers (trnsim/timing/realloc.py): in a Beta-1 kernel the tiles a
sequential loop body declares (sequential_range, and Python `range`, which the Beta-1 compiler
replaces by sequential_range) take the previous iteration's buffer, so the next iteration's
writes wait for the last reads of the previous one; affine_range and static_range iterations,
and kernels of the current API (whose Python loops are unrolled), keep separate tiles.

Exact ticks on the tiny chip (1 GHz: 1 cycle = 1 tick = 1 ns): MIN_II 64, engine latency 100,
semaphore latency 10 ns; an fp32 memset or tensor_copy of <= 64 elements per partition costs
64 cycles; 64 KiB of SBUF per partition (alignment 64 B).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np
import pytest

import trnsim
from trnsim.allocation import TileRecord
from trnsim.chip import load_chip
from trnsim.nki.jit import _as_kernel
from trnsim.timing.compiler import CompilerRules
from trnsim.timing.realloc import reallocate
from trnsim.timing.scheduler import Scheduler

from .builders import TINY, ProgramBuilder, tile

CHIP = load_chip(Path(__file__).parents[1] / "data" / "tiny_chip.yaml")
OFF = CompilerRules(sequential_buffers=False)
X = np.random.default_rng(5).standard_normal((4, 128, 256)).astype(np.float32)


def rec(offset: int, nbytes: int, born: int, decl=None) -> TileRecord:
    r = TileRecord("sbuf", 0, 0, 128, offset, nbytes, 64, 65536, True, [])
    r.born, r.decl = born, decl
    return r


def sb(offset: int, name: str) -> object:
    return tile("sbuf", (128, 64), "float32", offset, name=name)


def two_iterations() -> ProgramBuilder:
    """Iteration 1 writes A1 (VectorE memset) and copies it to C (ScalarE); iteration 2 writes
    A2, which the trace placed on fresh bytes (GpSimd memset)."""
    b = ProgramBuilder()
    b.add("memset", "vector", (), [replace(sb(0, "a1"), name="dst")], value=1.0)  # 0
    b.add("tensor_copy", "scalar", [replace(sb(0, "a1"), name="src")],
          [replace(sb(4096, "c"), name="dst")])  # 1
    b.add("memset", "gpsimd", (), [replace(sb(8192, "a2"), name="dst")], value=1.0)  # 2
    return b


# ---------------------------------------------------------------- exact ticks
@pytest.mark.parametrize(("same_declaration", "starts"), [
    pytest.param(True, [0, 174, 348], id="one-declaration-waits"),
    pytest.param(False, [0, 174, 0], id="two-declarations-overlap"),
])
def test_the_next_iteration_writes_after_the_last_read(same_declaration, starts):
    """A1's memset runs 0..164 (64 + latency 100); the copy reading A1 from 174 (+ the
    semaphore 10) to 338. A2 of the same declaration takes A1's bytes: its memset waits for the
    copy and starts at 348. Of another declaration it keeps fresh bytes and starts at once."""
    b = two_iterations()
    decl_2 = "loop body" if same_declaration else "elsewhere"
    records = [rec(0, 256, 0, "loop body"), rec(4096, 256, 0), rec(8192, 256, 2, decl_2)]
    got = Scheduler(load_chip(TINY), CompilerRules(), records).run(b.program)
    assert got.start == starts
    off = Scheduler(load_chip(TINY), OFF, records).run(b.program)
    assert off.start == [0, 174, 0]
    moved, note = reallocate(b.program, records, "traced", sequential_buffers=True)
    assert note == ""
    where = moved[2].writes[0].region.byte_start
    assert (where == moved[0].writes[0].region.byte_start) is same_declaration


def test_tiles_of_one_declaration_that_live_together_stay_apart():
    """Three tiles of one declaration all live until the last instruction (a list of tiles
    made in a Python loop): none can take another's buffer, so each keeps its own bytes."""
    b = ProgramBuilder()
    for k in range(3):
        b.add("memset", "vector", (), [replace(sb(1024 * k, f"t{k}"), name="dst")], value=0.0)
    for k in range(3):
        b.add("tensor_copy", "scalar", [replace(sb(1024 * k, f"t{k}"), name="src")],
              [replace(sb(8192 + 1024 * k, f"c{k}"), name="dst")])
    records = [rec(1024 * k, 256, k, "body") for k in range(3)]
    records += [rec(8192 + 1024 * k, 256, 3 + k) for k in range(3)]
    moved, note = reallocate(b.program, records, "traced", sequential_buffers=True)
    assert note == ""
    starts = [moved[k].writes[0].region.byte_start for k in range(3)]
    assert len(set(starts)) == 3


def test_the_rule_off_or_without_declarations_changes_nothing():
    """Records without declarations (the current API, affine iterations) leave the program as
    it is, the same objects: nothing is re-placed."""
    b = two_iterations()
    records = [rec(0, 256, 0), rec(4096, 256, 0), rec(8192, 256, 2)]
    assert reallocate(b.program, records, "traced", sequential_buffers=True) == (b.program, "")
    records[2].decl = records[0].decl = "body"
    assert reallocate(b.program, records, "traced", sequential_buffers=False) == (b.program, "")
    assert CompilerRules.none().sequential_buffers is False


# ---------------------------------------------------------------- Beta-1 kernels
def _stream(loop):
    @nki.jit(mode="simulation", platform_target="trn2")
    def stream(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in loop(x.shape[0]):
            t = nl.load(x[i])
            u = nl.multiply(t, 2.0)
            nl.store(out[i], value=u)
        return out
    return stream


LOOPS = {"python-range": range, "sequential_range": nl.sequential_range,
         "affine_range": nl.affine_range, "static_range": nl.static_range}


def _load_waits_for_previous_multiply(prof) -> list[bool]:
    """Per load after the first: whether it waits (anti) for the previous iteration's multiply."""
    prog = prof.program
    loads = [i for i, ins in enumerate(prog)
             if ins.opcode == "dma_copy" and ins.writes[0].region.space == "sbuf"]
    out = []
    for i in loads[1:]:
        deps = prof.deps(i)
        out.append(any(d.kind == "anti" and prog[d.producer].opcode != "dma_copy"
                       for d in deps))
    return out


@pytest.mark.parametrize("loop", ["python-range", "sequential_range"])
def test_a_sequential_loop_reuses_its_tiles(loop):
    """Each load waits for the previous iteration's multiply to read its tile; off, the
    iterations' tiles are apart and nothing waits; values are the same."""
    kernel = _stream(LOOPS[loop])
    on = trnsim.profile(kernel, X, chip=CHIP)
    off = trnsim.profile(kernel, X, chip=CHIP, rules=OFF)
    assert _load_waits_for_previous_multiply(on) == [True] * 3
    assert _load_waits_for_previous_multiply(off) == [False] * 3
    assert on.latency_ns > off.latency_ns
    np.testing.assert_array_equal(on.outputs, off.outputs)
    np.testing.assert_array_equal(on.outputs, X * 2)


@pytest.mark.parametrize("loop", ["affine_range", "static_range"])
def test_independent_iterations_keep_their_own_tiles(loop):
    """affine_range and static_range iterations declare their tiles apart: the same timeline
    with the rule on and off."""
    kernel = _stream(LOOPS[loop])
    on = trnsim.profile(kernel, X, chip=CHIP)
    off = trnsim.profile(kernel, X, chip=CHIP, rules=OFF)
    assert _load_waits_for_previous_multiply(on) == [False] * 3
    assert on.latency_ns == off.latency_ns


def _declarations(kernel, *args) -> list:
    run = _as_kernel(kernel).launch(list(args), {}, chip=CHIP, values=False)
    return [r.decl for r in run.device.allocations if r.auto]


def _scale(t):
    return nl.multiply(t, 3.0)


@nki.jit(mode="simulation", platform_target="trn2")
def helper_twice(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in range(x.shape[0]):
        t = nl.load(x[i])
        a = _scale(t)
        b = _scale(a)
        nl.store(out[i], value=b)
    return out


def test_a_helper_called_from_two_lines_makes_two_declarations():
    """The declaration is the call stack of the user's frames: the helper's tile made from
    the first call line and from the second are two declarations, each the same in every
    iteration of the Python loop."""
    decls = _declarations(helper_twice, X)
    assert len(decls) == 12  # load, first scale, second scale per iteration
    per_iteration = [decls[k:k + 3] for k in range(0, 12, 3)]
    assert all(it == per_iteration[0] for it in per_iteration)
    assert len(set(per_iteration[0])) == 3


def test_affine_iterations_are_part_of_the_declaration():
    """Inside an affine_range the iteration is part of the declaration; a sequential_range
    around it is not."""

    @nki.jit(mode="simulation", platform_target="trn2")
    def nested(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for s in nl.sequential_range(2):
            for a in nl.affine_range(2):
                nl.store(out[2 * s + a], value=nl.load(x[2 * s + a]))
        return out

    decls = _declarations(nested, X)
    assert len(decls) == 4
    assert decls[0] == decls[2] and decls[1] == decls[3] and decls[0] != decls[1]


def test_current_api_python_loops_are_unrolled_not_redeclared():
    """`import nki`: Python loops are unrolled at specialization time; no tile carries a
    declaration and the rule changes nothing."""
    import nki as gnki
    import nki.isa as nisa
    import nki.language as gnl

    @gnki.jit
    def ga_stream(x):
        out = gnl.ndarray(x.shape, dtype=x.dtype, buffer=gnl.shared_hbm)
        for i in range(x.shape[0]):
            t = gnl.ndarray(x.shape[1:], dtype=x.dtype, buffer=gnl.sbuf)
            nisa.dma_copy(dst=t, src=x[i])
            nisa.dma_copy(dst=out[i], src=t)
        return out

    assert set(_declarations(ga_stream, X)) == {None}
    on = trnsim.profile(ga_stream, X, chip=CHIP)
    off = trnsim.profile(ga_stream, X, chip=CHIP, rules=OFF)
    assert on.latency_ns == off.latency_ns
