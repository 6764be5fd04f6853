"""Semantics of the random-number instructions (nki-api.md §7.3): rng, set_rng_seed, rand2,
rand_set_state, rand_get_state, dropout. Pure numpy; knows nothing about time.

PRNG model. The docs name the generator XORWOW (Marsaglia 2003) and give its state size:
6 uint32 words per lane on GpSimd, 24 on the Vector engine (NC-v4). trnsim keeps, per core,
core.state["rng.gpsimd"] (partitions x 6) and core.state["rng.vector"] (partitions x 24):
one XORWOW generator per GpSimd lane and four per Vector lane. A generator's 6 words are
(x, y, z, w, v, d); one step is
    t = x ^ (x >> 2); x, y, z, w = y, z, w, v; v = (v ^ (v << 4)) ^ (t ^ (t << 1));
    d += 362437; output = d + v   (all mod 2^32).
An instruction fills each partition's elements in row-major order; on the Vector engine
element j of a partition comes from generator j % 4 (its (j // 4)-th output), on GpSimd
from the lane's only generator. Lane = absolute partition index.

Seeding (the hardware's seed expansion is not documented): a lane's states are drawn from
core.rng (seeded by the device seed and core index) on first use, so runs are
deterministic per seed; set_rng_seed(seed) sets word k of Vector generator g on lane p to
splitmix64(seed, p, g, k) (low 32 bits). rand_set_state/rand_get_state move raw states.
Uniform floats use the top 24 bits: u = (bits >> 8) * 2^-24 in [0, 1).
dropout zeroes an element when u < prob and keeps it bit-exactly otherwise; it does NOT
rescale kept values by 1/(1-prob) (none is documented).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trnsim.memory import View
from trnsim.semantics import _ops, semantics
from trnsim.semantics import _vector_rules as R
from trnsim.spec import elems_of, fail, is_tensor, partitions_of

WORDS = 6  # x, y, z, w, v, d
GENERATORS = {"vector": 4, "gpsimd": 1}
_WEYL = np.uint32(362437)
_U32 = np.uint64(0xFFFFFFFF)


def _states(core: Any, engine: str) -> np.ndarray:
    """The engine's (partitions, generators, 6) uint32 XORWOW states, created on first use."""
    key = f"rng.{engine}"
    if key not in core.state:
        parts = core.accumulators["vector"].shape[0]
        draw = core.rng.integers(0, 2**32, size=(parts, GENERATORS[engine], WORDS), dtype=np.uint64)
        core.state[key] = draw.astype(np.uint32)
    return core.state[key]


def _xorwow(state: np.ndarray, count: int) -> np.ndarray:
    """Advance states (..., 6) `count` steps in place; returns outputs (..., count)."""
    x, y, z, w, v, d = (state[..., k].copy() for k in range(WORDS))
    out = np.empty((*state.shape[:-1], count), dtype=np.uint32)
    for i in range(count):
        t = x ^ (x >> np.uint32(2))
        x, y, z, w = y, z, w, v
        v = (v ^ (v << np.uint32(4))) ^ (t ^ (t << np.uint32(1)))
        d = d + _WEYL
        out[..., i] = d + v
    for k, word in enumerate((x, y, z, w, v, d)):
        state[..., k] = word
    return out


def random_bits(core: Any, engine: str, view: View) -> np.ndarray:
    """32 random bits per element of `view`, as (P, N) uint32, advancing the lanes' states."""
    states = _states(core, engine)
    lanes = _ops.lanes_of(view)
    n = elems_of(view)
    gens = GENERATORS[engine]
    steps = -(-n // gens)
    sub = states[lanes]
    with np.errstate(over="ignore"):
        out = _xorwow(sub, steps)  # (P, gens, steps)
    states[lanes] = sub
    # element j <- generator j % gens, output j // gens
    return out.transpose(0, 2, 1).reshape(len(lanes), steps * gens)[:, :n]


def uniform(bits: np.ndarray) -> np.ndarray:
    """fp32 uniforms in [0, 1) from the top 24 bits."""
    return ((bits >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)).astype(np.float32)


def _splitmix64(z: np.ndarray) -> np.ndarray:
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def seed_states(seed: int, parts: int, gens: int) -> np.ndarray:
    """Deterministic XORWOW states for every lane from one 32-bit seed."""
    idx = np.arange(parts * gens * WORDS, dtype=np.uint64).reshape(parts, gens, WORDS)
    with np.errstate(over="ignore"):
        z = _splitmix64((np.uint64(seed & 0xFFFFFFFF) << np.uint64(32)) ^ idx)
    st = (z & _U32).astype(np.uint32)
    dead = ~st[..., :5].any(axis=-1)  # XORWOW needs a non-zero (x..v)
    st[..., 0][dead] = 1
    return st


# ---------------------------------------------------------------- rng


def check_rng(*, chip: Any, engine: str, attrs: dict, dst: View) -> None:
    instr = "rng"
    if engine == "gpsimd" and chip.nc_version < 3:
        fail(
            instr,
            "GpSimd random numbers need NeuronCore-v3 or newer",
            "use engine=nisa.vector on NeuronCore-v2",
        )
    if dst.dtype.kind not in ("int", "uint"):
        fail(
            instr,
            f"dst has dtype {dst.dtype.name}",
            "rng writes random bits into an integer dst (int8/16/32, uint8/16/32)",
        )


@semantics("rng")
def rng(core: Any, *, engine: str, dst: View) -> None:
    """32 random bits per element, truncated to dst's integer width (low bits kept)."""
    _ops.write_bits(dst, random_bits(core, engine, dst).astype(np.int64))


def check_set_rng_seed(*, chip: Any, engine: str, attrs: dict, src_seeds: View) -> None:
    instr = "set_rng_seed"
    if tuple(src_seeds.shape) != (1, 1):
        fail(instr, f"src_seeds has shape {tuple(src_seeds.shape)}", "it must be [1, 1]")


@semantics("set_rng_seed")
def set_rng_seed(core: Any, *, engine: str, src_seeds: View) -> None:
    """Seed every lane of the Vector PRNG from one 32-bit value (see the module notes)."""
    seed = int(np.asarray(src_seeds.read()).reshape(-1)[0].astype(np.int64)) & 0xFFFFFFFF
    st = _states(core, "vector")
    st[...] = seed_states(seed, st.shape[0], st.shape[1])


def _state_words(engine: str) -> int:
    return GENERATORS[engine] * WORDS


def _check_state_engine(instr: str, chip: Any, engine: str) -> None:
    R.need_gen(instr, chip, 3, instr)
    if engine == "vector":
        R.need_gen(instr, chip, 4, "Vector-engine PRNG state")


def check_rand_set_state(*, chip: Any, engine: str, attrs: dict, src_seeds: View) -> None:
    instr = "rand_set_state"
    _check_state_engine(instr, chip, engine)
    if elems_of(src_seeds) != _state_words(engine):
        fail(
            instr,
            f"src_seeds has {elems_of(src_seeds)} values per partition",
            f"the {engine} engine's XORWOW state is {_state_words(engine)} uint32 per lane",
        )


def check_rand_get_state(*, chip: Any, engine: str, attrs: dict, dst: View) -> None:
    instr = "rand_get_state"
    _check_state_engine(instr, chip, engine)
    if elems_of(dst) != _state_words(engine):
        fail(
            instr,
            f"dst has {elems_of(dst)} values per partition",
            f"the {engine} engine's XORWOW state is {_state_words(engine)} uint32 per lane",
        )


@semantics("rand_set_state")
def rand_set_state(core: Any, *, engine: str, src_seeds: View) -> None:
    """Load raw XORWOW states (uint32) into the lanes of src_seeds' partitions."""
    st = _states(core, engine)
    lanes = _ops.lanes_of(src_seeds)
    st[lanes] = src_seeds.read().reshape(len(lanes), *st.shape[1:]).astype(np.uint32)


@semantics("rand_get_state")
def rand_get_state(core: Any, *, engine: str, dst: View) -> None:
    """Store the lanes' raw XORWOW states (uint32) into dst."""
    st = _states(core, engine)
    lanes = _ops.lanes_of(dst)
    dst.write_raw(st[lanes].reshape(dst.shape).astype(dst.dtype.storage))


# ---------------------------------------------------------------- rand2, dropout


def check_rand2(*, chip: Any, engine: str, attrs: dict, dst: View, min: Any, max: Any) -> None:
    instr = "rand2"
    R.need_gen(instr, chip, 4, "rand2")
    for name, v in (("min", min), ("max", max)):
        if v is None:
            fail(instr, f"{name} is required", "pass a number or a (P, 1) tensor")
        R.check_per_partition(instr, name, v, dst)


@semantics("rand2")
def rand2(core: Any, *, engine: str, dst: View, min: Any, max: Any) -> None:
    """Uniform fp32 in [min, max] (per partition), cast to dst's dtype."""
    parts = partitions_of(dst)
    u = uniform(random_bits(core, "vector", dst))
    lo = R.per_partition_values(min, parts)
    hi = R.per_partition_values(max, parts)
    dst.write((lo + (hi - lo) * u).astype(np.float32).reshape(dst.shape))


def check_dropout(*, chip: Any, engine: str, attrs: dict, dst: View, data: View, prob: Any) -> None:
    instr = "dropout"
    R.check_same_layout(instr, "data", data, dst=dst)
    if prob is None:
        fail(instr, "prob is required", "pass a number in [0, 1] or a (P, 1) tensor")
    R.check_per_partition(instr, "prob", prob, data)
    if is_tensor(prob):
        if data.dtype.kind != "float" and prob.dtype.name != "float32":
            fail(
                instr,
                f"prob has dtype {prob.dtype.name} with {data.dtype.name} data",
                "prob must be float32 for integer data",
            )
    elif not 0.0 <= float(prob) <= 1.0:
        fail(instr, f"prob={prob!r} is outside [0, 1]", "a drop probability is in [0, 1]")


@semantics("dropout")
def dropout(core: Any, *, engine: str, dst: View, data: View, prob: Any) -> None:
    """Zero each element with probability prob (u < prob); keep the rest bit-exactly.
    No 1/(1-prob) rescaling is applied."""
    parts = partitions_of(data)
    u = uniform(random_bits(core, "vector", data))
    p = R.per_partition_values(prob, parts)
    keep = u >= p
    vals = data.read().reshape(parts, -1)
    out = np.where(keep, vals, np.zeros((), dtype=vals.dtype))
    dst.write_raw(out.reshape(dst.shape))
