"""benchmarks/heldout_kernels: NKIBench's bmm_softmax and lora baselines, rewritten for the
calibration set with the baselines' block-tensor declarations (far more than SBUF at the
published shapes, so trnsim's Beta-1 allocator places them block by block and spills), match
float64 references at small shapes; a timing-only profile (values=False, zero-stride inputs)
issues the same program, with the same latency, as a run with values; and bmm_softmax's
seed_accumulators, which its values need (see its docstring), adds nothing but memsets."""

from __future__ import annotations

import numpy as np
import pytest

import trnsim

from .kernel_files import load

_EPS32 = float(np.finfo(np.float32).eps)

bsm_mod = load("nkibench_bmm_softmax")
lora_mod = load("nkibench_lora")


def _signature(prof) -> list[tuple]:
    return [(i.opcode, i.engine, i.reads, i.writes, i.attrs) for i in prof.program]


def _zeros_like(*arrays: np.ndarray) -> list[np.ndarray]:
    return [np.broadcast_to(np.zeros((), a.dtype), a.shape) for a in arrays]


def _spill_dmas(prof) -> int:
    """Spill saves and reloads of blocks that did not fit (_spill.SPILL_ATTR)."""
    return sum("spill_reload" in i.attrs for i in prof.program)


def _bmm_softmax_inputs(rng: np.random.Generator) -> list[np.ndarray]:
    """B = 2, M = 2048 (two row blocks), K = 64, N = 3072 (three column blocks), N(0, 1): a
    batch's scores and exponentials (192 KiB per partition each) outgrow SBUF, so blocks are
    spilled and reloaded."""
    return [
        rng.standard_normal((2, 2048, 64)).astype(np.float32),
        rng.standard_normal((2, 64, 3072)).astype(np.float32),
    ]


def _lora_inputs(rng: np.random.Generator) -> list[np.ndarray]:
    """M = 1024 (two 512-row groups: one per half), K = 5120 (the smallest K both K splits
    divide, 8 and 10 tiles: 5 loads per row tile in pass 1, 4 sequential steps in pass 2),
    R = 128, N = 1024 (one block), N(0, 1) as NKIBench draws them."""
    shapes = ((2, 4, 128, 40, 128), (40, 128, 1024), (40, 128, 128), (128, 1024))
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


_KERNELS = {
    "bmm_softmax": (bsm_mod.bmm_softmax, _bmm_softmax_inputs),
    "lora": (lora_mod.lora, _lora_inputs),
}


@pytest.fixture(scope="module")
def profiled():
    """profiled(name, values=..., seeded=...) -> (args, trnsim.profile on trn1), each made once
    (they take seconds at these shapes); values=False runs on zero-stride zeros."""
    cache: dict[tuple, tuple] = {}

    def run(name: str, *, values: bool, seeded: bool = False) -> tuple:
        key = (name, values, seeded)
        if key not in cache:
            kernel, make = _KERNELS[name]
            args = make(np.random.default_rng(0))
            if not values:
                args = _zeros_like(*args)
            kwargs = {"seed_accumulators": True} if seeded else {}
            cache[key] = (args, trnsim.profile(kernel, *args, chip="trn1", values=values, **kwargs))
        return cache[key]

    return run


def test_bmm_softmax_matches_float64(profiled):
    """fp32 throughout; the error of exp(s - max) is relative, about the fp32 rounding of s and
    of s - max (eps * (|s| + |max|), s an exact K = 64 dot product rounded once), on top of a
    few eps from exp, the row sum, the reciprocal and the scaling: rtol eps * (2 max|s| + 64)
    (about 1.7e-5 here; seen 7e-6). atol: fp32's smallest normal, for probabilities that
    underflow (< e^-80 of the row's largest)."""
    (lhs, rhs), prof = profiled("bmm_softmax", values=True, seeded=True)
    assert _spill_dmas(prof) > 0  # the values survive spills and reloads
    ref = bsm_mod.reference(lhs, rhs)
    got = prof.outputs
    assert got.shape == ref.shape == (2, 16, 128, 3072) and got.dtype == np.float32
    s_max = np.abs(np.matmul(lhs.astype(np.float64), rhs.astype(np.float64))).max()
    rtol = _EPS32 * (2 * s_max + 64)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=float(np.finfo(np.float32).tiny))


def test_lora_matches_float64(profiled):
    """Every output passes through 10 to 40 fp32 roundings of partial sums of the order of the
    outputs (PSUM sums over 10 or 40 K tiles, 4 SBUF folds, x @ a rounded before the matmul by
    b, the final add): about sqrt(40) ~ 6 ulps of the largest output as a random walk; 16
    bound it (seen ~1.2)."""
    args, prof = profiled("lora", values=True)
    ref = lora_mod.reference(*args)
    got = prof.outputs
    assert got.shape == ref.shape == (2, 4, 128, 8, 128) and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=0, atol=16 * _EPS32 * np.abs(ref).max())


def test_bmm_softmax_seeding_adds_only_memsets(profiled):
    """The values checked above come from the program that is timed plus one memset per
    [128, 1] accumulator block (2 per 128-row tile): nothing else moves."""
    _, seeded = profiled("bmm_softmax", values=True, seeded=True)
    _, baseline = profiled("bmm_softmax", values=False)
    seeded_sig = _signature(seeded)
    memsets = [s for s in seeded_sig if s[0] == "memset"]
    assert len(memsets) == 2 * 2 * 2048 // 128
    assert [s for s in seeded_sig if s[0] != "memset"] == _signature(baseline)


@pytest.mark.parametrize("name", ["bmm_softmax", "lora"])
def test_timing_only_same_program(profiled, name):
    """The programs as timed (bmm_softmax unseeded: its values are NaN, its program is the
    baseline's), with values and without: the spills are decided alike."""
    _, with_values = profiled(name, values=True)
    _, timing = profiled(name, values=False)
    assert timing.outputs is None
    assert _spill_dmas(timing) == _spill_dmas(with_values)
    assert _signature(timing) == _signature(with_values)
    assert timing.latency_ns == with_values.latency_ns
