"""The compiler rules of trnsim/timing/compiler.py, in exact ticks on the tiny chip (1 GHz:
1 cycle = 1 tick = 1 ns), each rule on and off.

Tiny chip numbers used below: MIN_II 64, engine latency 100 (LoadStationary 50), semaphore
latency 10 ns; a 128-row bf16 stationary loads in 128/4 = 32 cycles; an fp32 memset or a
tensor_scalar of N elements per partition costs max(64, N).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from trnsim.chip import load_chip
from trnsim.timing.compiler import CompilerRules, dropped_zero_fills
from trnsim.timing.reorder import schedule
from trnsim.timing.scheduler import Scheduler

from .builders import ProgramBuilder, tile

OFF = CompilerRules.none()


def only(**on: bool) -> CompilerRules:
    return replace(OFF, **on)


def zero_fill(b: ProgramBuilder, free: int = 512, offset: int = 0) -> int:
    return b.add(
        "memset", "vector", (), [tile("psum", (128, free), "float32", offset, name="dst")], value=0
    )


def matmul(
    b: ProgramBuilder, dst_off: int = 0, st_off: int = 0, mv_off: int = 32768, free: int = 512
) -> int:
    return b.matmul(
        tile("psum", (128, free), "float32", dst_off),
        tile("sbuf", (128, 128), offset=st_off),
        tile("sbuf", (128, free), offset=mv_off),
    )


# ---------------------------------------------------------------- PSUM zero-fill
def test_zero_fill_the_first_matmul_overwrites_is_dropped(tiny_chip, builder):
    """memset(0) of a PSUM tile, then the accumulation group's matmul: on, the memset takes no
    time and the matmul starts after its LoadStationary (32); off, it waits for the memset
    (512 + latency 100) plus the semaphore (10)."""
    zero_fill(builder)
    mm = matmul(builder)
    on = Scheduler(tiny_chip, only(drop_psum_zero_fill=True)).run(builder.program)
    off = Scheduler(tiny_chip, OFF).run(builder.program)
    assert (on.start[0], on.end[0]) == (0, 0)
    assert on.start[mm] == 32
    assert (off.start[0], off.end[0]) == (0, 612)
    assert off.start[mm] == 622


def test_zero_fill_dropped_keeps_the_wait_for_earlier_readers(tiny_chip, builder):
    """The dropped fill's WAR wait (a copy still reading the bank) passes to the matmul."""
    reader = builder.add(
        "tensor_copy",
        "scalar",
        [tile("psum", (128, 512), "float32", name="src")],
        [tile("sbuf", (128, 512), "float32", 65536, name="dst")],
    )
    zero_fill(builder)
    mm = matmul(builder)
    tl = Scheduler(tiny_chip, only(drop_psum_zero_fill=True)).run(builder.program)
    assert tl.end[reader] == 612  # max(64, 512) + latency 100
    assert tl.start[mm] == 612 + 10


@pytest.mark.parametrize(
    "second",
    [
        pytest.param("read", id="read-before-matmul"),
        pytest.param("half", id="matmul-covers-half"),
    ],
)
def test_zero_fill_is_kept_when_its_zeros_are_seen(second, builder):
    """A read of the zeros, or a matmul covering only half the tile, keeps the memset."""
    zero_fill(builder)
    if second == "read":
        builder.add(
            "tensor_copy",
            "vector",
            [tile("psum", (128, 512), "float32", name="src")],
            [tile("sbuf", (128, 512), "float32", 65536, name="dst")],
        )
        matmul(builder)
    else:
        matmul(builder, free=256)
    assert dropped_zero_fills(builder.program) == set()


def test_zero_fill_covered_by_two_matmul_tiles_is_dropped(builder):
    zero_fill(builder, free=512)
    matmul(builder, dst_off=0, free=256)
    matmul(builder, dst_off=1024, mv_off=40960, free=256)
    matmul(builder, dst_off=0, free=256)  # accumulates onto the first tile
    assert dropped_zero_fills(builder.program) == {0}


# ---------------------------------------------------------------- engine placement
def _scalar_op(b: ProgramBuilder, k: int) -> int:
    i = b.add(
        "tensor_scalar",
        "vector",
        [tile("sbuf", (128, 512), "float32", 4096 * k, name="data")],
        [tile("sbuf", (128, 512), "float32", 65536 + 4096 * k, name="dst")],
        op0="multiply",
        operand0=2.0,
    )
    b.program[i].engine_unknown = True
    return i


def test_unknown_engine_work_goes_to_the_less_loaded_engine(tiny_chip, builder):
    """Three independent engine=unknown tensor_scalars (512 cycles each): on, they alternate
    VectorE, ScalarE, VectorE; off, all three queue on VectorE."""
    ids = [_scalar_op(builder, k) for k in range(3)]
    on = Scheduler(tiny_chip, only(place_unknown_engine=True)).run(builder.program)
    off = Scheduler(tiny_chip, OFF).run(builder.program)
    assert [on.queue[i][1] for i in ids] == ["vector", "scalar", "vector"]
    assert [on.start[i] for i in ids] == [0, 0, 512]
    assert [off.queue[i][1] for i in ids] == ["vector"] * 3
    assert [off.start[i] for i in ids] == [0, 512, 1024]


def test_placement_leaves_engines_the_kernel_chose(tiny_chip, builder):
    ids = [_scalar_op(builder, k) for k in range(3)]
    builder.program[ids[1]].engine_unknown = False
    tl = Scheduler(tiny_chip, only(place_unknown_engine=True)).run(builder.program)
    assert [tl.queue[i][1] for i in ids] == ["vector", "vector", "scalar"]


def _psum_copy(b: ProgramBuilder, k: int) -> int:
    i = b.add(
        "tensor_copy",
        "vector",
        [tile("psum", (128, 512), "float32", 2048 * k, name="src")],
        [tile("sbuf", (128, 512), "float32", 65536 + 2048 * k, name="dst")],
    )
    b.program[i].engine_unknown = True
    return i


@pytest.mark.parametrize(
    ("version", "rule", "engines"),
    [
        pytest.param(2, True, ["vector"] * 3, id="nc-v2-port-counted"),
        pytest.param(2, False, ["vector", "scalar", "vector"], id="nc-v2-rule-off"),
        pytest.param(3, True, ["vector", "scalar", "vector"], id="nc-v3-no-shared-port"),
    ],
)
def test_psum_copies_are_not_split_over_a_shared_port(tiny_chip, builder, version, rule, engines):
    """Three engine=unknown PSUM -> SBUF copies (512 cycles each). On NC-v2 VectorE and ScalarE
    share the PSUM port, so the copies run one after the other on either engine (0, 512, 1024,
    in some order); the rule counts the port and keeps them on the first engine, where each
    costs as much (a tie); without it (or on NC-v3, no shared port) they alternate."""
    ids = [_psum_copy(builder, k) for k in range(3)]
    chip = load_chip(tiny_chip.path, nc_version=version)
    rules = only(place_unknown_engine=True, psum_port_placement=rule)
    tl = Scheduler(chip, rules).run(builder.program)
    assert [tl.queue[i][1] for i in ids] == engines
    expected = [0, 512, 1024] if version == 2 else [0, 0, 512]
    assert sorted(tl.start[i] for i in ids) == expected


def test_sbuf_work_is_balanced_beside_the_psum_port(tiny_chip, builder):
    """NC-v2: an engine=unknown SBUF-only op after two PSUM copies on VectorE goes to ScalarE
    (the port does not concern it)."""
    copies = [_psum_copy(builder, k) for k in range(2)]
    op = _scalar_op(builder, 3)
    chip = load_chip(tiny_chip.path, nc_version=2)
    tl = Scheduler(chip, only(place_unknown_engine=True, psum_port_placement=True)).run(
        builder.program
    )
    assert [tl.queue[i][1] for i in [*copies, op]] == ["vector", "vector", "scalar"]
    assert tl.start[op] == 0


# ---------------------------------------------------------------- LoadStationary reuse
def test_reused_stationary_issues_no_load_stationary(tiny_chip, builder):
    """Two matmuls with one stationary: on, the second has no LoadStationary (zero length)
    and follows the first MultiplyMoving (512) directly; off, it loads again (32)."""
    matmul(builder, dst_off=0, mv_off=32768)
    second = matmul(builder, dst_off=2048, mv_off=40960)
    on = Scheduler(tiny_chip, only(reuse_stationary=True)).run(builder.program)
    off = Scheduler(tiny_chip, OFF).run(builder.program)
    assert on.ls[second][0] == on.ls[second][1]
    assert off.ls[second][1] - off.ls[second][0] == 32 + 50  # LS issue + latency
    assert on.start[second] == off.start[second] == 32 + 512  # background load hides it here
    on_ls = [on.ls[i][1] - on.ls[i][0] for i in (0, second)]
    assert on_ls == [82, 0]


def test_stationary_rewritten_in_between_is_loaded_again(tiny_chip, builder):
    matmul(builder, dst_off=0)
    builder.add(
        "tensor_copy",
        "vector",
        [tile("sbuf", (128, 128), offset=8192, name="src")],
        [tile("sbuf", (128, 128), offset=0, name="dst")],
    )
    third = matmul(builder, dst_off=2048, mv_off=40960)
    tl = Scheduler(tiny_chip, only(reuse_stationary=True)).run(builder.program)
    assert tl.ls[third][1] - tl.ls[third][0] == 82


def test_reuse_changes_no_start_when_background_load_hides_it(tiny_chip, builder):
    """Short moving tiles (64 columns, MM II 64): a reloaded LoadStationary (32) hides behind
    the previous MultiplyMoving, so reuse changes only the Tensor row, not the starts."""
    ids = [matmul(builder, dst_off=256 * k, mv_off=32768 + 128 * k, free=64) for k in range(4)]
    on = schedule(builder.program, tiny_chip, reorder=False, rules=only(reuse_stationary=True))
    off = schedule(builder.program, tiny_chip, reorder=False, rules=OFF)
    assert [on.start[i] for i in ids] == [32, 96, 160, 224]
    assert [off.start[i] for i in ids] == [32, 96, 160, 224]  # background LS hides 32 < 64
    assert [on.ls[i][1] - on.ls[i][0] for i in ids] == [82, 0, 0, 0]


# ---------------------------------------------------------------- activation tables
@pytest.fixture
def table_chip(tiny_chip):
    return load_chip(tiny_chip, **{"timing.act_table_load_ns": 1000})


def _act(b: ProgramBuilder, k: int, op: str) -> int:
    return b.add(
        "activation",
        "scalar",
        [tile("sbuf", (128, 512), offset=2048 * k, name="data")],
        [tile("sbuf", (128, 512), offset=32768 + 2048 * k, name="dst")],
        op=op,
    )


def test_activation_table_loads_when_the_function_set_changes(table_chip, builder):
    """exp, exp, rsqrt, copy, exp: loads before #0 (first use), #2 (another set) and #4 (back
    to exp's set); copy needs no table. Each load occupies ScalarE for 1000 before the
    activation; each activation issues after 512."""
    ids = [_act(builder, k, op) for k, op in enumerate(["exp", "exp", "rsqrt", "copy", "exp"])]
    on = Scheduler(table_chip, only(act_table_load=True)).run(builder.program)
    off = Scheduler(table_chip, OFF).run(builder.program)
    assert sorted(on.table_loads) == [ids[0], ids[2], ids[4]]
    assert on.table_loads[ids[0]] == (0, 1000)
    assert [on.start[i] for i in ids] == [1000, 1512, 3024, 3536, 5048]
    assert on.table_loads[ids[4]] == (4048, 5048)
    assert off.table_loads == {}
    assert [off.start[i] for i in ids] == [0, 512, 1024, 1536, 2048]


def test_activation_duration_excludes_its_table_load(table_chip, builder):
    """The load is its own bar (ACT_TABLE_LOAD); the activation's own duration is unchanged."""
    _act(builder, 0, "exp")
    tl = Scheduler(table_chip).run(builder.program)
    assert tl.end[0] - tl.start[0] == 512 + 100


def test_compiler_data_names_known_functions_and_sources():
    """Every function of isa/compiler.yaml's activation sets is a simulated activation, and
    every source is a known Sources ID."""
    from trnsim import yamlfile
    from trnsim.chip import sources
    from trnsim.semantics.activation import ACTIVATIONS
    from trnsim.timing.compiler import _data_path, compiler_data

    assert set(compiler_data()["function_set"]) <= set(ACTIVATIONS)
    raw = yamlfile.load(_data_path().read_text())
    assert {rec["source"] for rec in raw.values()} <= set(sources())


def test_kernels_record_which_engines_they_left_to_the_compiler():
    """engine=unknown (the default) with no documented rule marks the instruction; an
    explicit engine does not; a placed tensor_copy keeps its values (values are computed on
    the default engine)."""
    import numpy as np

    import trnsim.nki as nki
    import trnsim.nki.isa as nisa
    import trnsim.nki.language as nl
    from trnsim.timing.profile import profile

    @nki.jit
    def copies(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.tensor_copy(dst=a, src=t)
        nisa.tensor_copy(dst=b, src=a, engine=nisa.vector_engine)
        nisa.dma_copy(dst=out, src=b)
        return out

    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    prof = profile(copies, x, chip="trn2")
    np.testing.assert_array_equal(prof.outputs, x)
    marks = [(i.opcode, i.engine_unknown) for i in prof.program if i.opcode == "tensor_copy"]
    assert marks == [("tensor_copy", True), ("tensor_copy", False)]


# ---------------------------------------------------------------- ScalarE equivalents
def _recip(b: ProgramBuilder, unknown: bool = True) -> int:
    """A VectorE reciprocal whose engine the kernel left to the compiler (as both APIs record
    nisa.reciprocal without an engine), or pinned (Beta-1 engine=nisa.vector_engine)."""
    i = b.add(
        "reciprocal",
        "vector",
        [tile("sbuf", (128, 512), "float32", offset=65536, name="data")],
        [tile("sbuf", (128, 512), "float32", offset=98304, name="dst")],
    )
    b.program[i].engine_unknown = unknown
    return i


@pytest.mark.parametrize(("first", "moves"), [("sqrt", True), ("exp", False)])
def test_reciprocal_runs_on_scalar_when_its_table_is_loaded(tiny_chip, builder, first, moves):
    """sqrt (set reciprocal_sqrt_and_small, which holds reciprocal) then a VectorE reciprocal
    of 512 elements: on, it runs on ScalarE as activation(reciprocal), max(64, N) = 512 after
    the sqrt's II (start 512, end 512 + 512 + 100); after exp (another set) it stays on
    VectorE at the documented 8N = 4096 (start 0, end 4196), as it does with the rule off."""
    _act(builder, 0, first)
    r = _recip(builder)
    on = Scheduler(tiny_chip, only(scalar_equivalent=True)).run(builder.program)
    off = Scheduler(tiny_chip, OFF).run(builder.program)
    assert (off.queue[r][1], off.start[r], off.end[r]) == ("vector", 0, 4196)
    if moves:
        assert (on.queue[r][1], on.start[r], on.end[r]) == ("scalar", 512, 1124)
    else:
        assert (on.queue[r][1], on.start[r], on.end[r]) == ("vector", 0, 4196)


def test_a_reciprocal_pinned_to_vector_stays(tiny_chip, builder):
    """Beta-1 nisa.reciprocal(..., engine=nisa.vector_engine) after sqrt: the kernel chose the
    engine, so the rule leaves it on VectorE at 8N (start 0, end 4196)."""
    _act(builder, 0, "sqrt")
    r = _recip(builder, unknown=False)
    on = Scheduler(tiny_chip, only(scalar_equivalent=True)).run(builder.program)
    assert (on.queue[r][1], on.start[r], on.end[r]) == ("vector", 0, 4196)


def test_a_moved_reciprocal_loads_no_table(tiny_chip, builder):
    """With table loads on (1000 each): sqrt loads its set once; the reciprocal moved behind it
    needs none (its function is in the loaded set), so only #0 has a load."""
    chip = load_chip(tiny_chip, **{"timing.act_table_load_ns": 1000})
    _act(builder, 0, "sqrt")
    r = _recip(builder)
    tl = Scheduler(chip, only(scalar_equivalent=True, act_table_load=True)).run(builder.program)
    assert sorted(tl.table_loads) == [0]
    assert (tl.queue[r][1], tl.start[r]) == ("scalar", 1512)
