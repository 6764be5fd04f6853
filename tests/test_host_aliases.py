"""Module paths and host packages NKI test code imports: nki.isa.constants (GA and Beta 1), the
neuron_dtypes alias, and the nki_cpu_simulator alias nki-library's harness imports."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import trnsim.coverage as cov
from trnsim.errors import UnsupportedError

# Members as the nki.isa docs list them (nki-api.md §7: enums of nki.isa).
DOCUMENTED = {
    "engine": {"unknown", "tensor", "scalar", "gpsimd", "dma", "vector", "sync"},
    "reduce_cmd": {"idle", "reset", "reduce", "reset_reduce", "load_reduce"},
    "dge_mode": {"unknown", "swdge", "hwdge", "none"},
    "oob_mode": {"error", "skip"},
    "nc_version": {"gen2", "gen3", "gen4"},
    "matmul_perf_mode": {"none", "double_row"},
    "dma_engine": {"dma", "gpsimd_dma"},
}


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, check=False, env={**os.environ, **env})


# ---------------------------------------------------------------- nki.isa.constants
def test_isa_constants_module_holds_the_documented_enums():
    import nki.isa.constants as c
    from nki.isa import constants

    assert constants is c
    for name, members in DOCUMENTED.items():
        assert getattr(c, name) is getattr(nisa, name), name
        assert {m.name for m in getattr(c, name)} == members, name


def test_kernel_using_isa_constants_runs():
    """dma_copy with dge_mode / oob_mode spelled from nki.isa.constants."""
    from nki.isa.constants import dge_mode, oob_mode

    def kernel(x):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x, dge_mode=dge_mode.hwdge, oob_mode=oob_mode.error)
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t, dge_mode=dge_mode.swdge)
        return out

    x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    np.testing.assert_array_equal(nki.simulate(kernel)(x), x)


def test_beta1_isa_constants_module():
    import neuronxcc.nki.isa as b1_nisa
    from neuronxcc.nki.isa.constants import dge_mode, engine

    assert b1_nisa.constants.dge_mode is dge_mode is b1_nisa.dge_mode
    assert engine.tensor is b1_nisa.tensor_engine


def test_coverage_counts_module_paths():
    ga = cov.path_coverage("ga")
    assert {"nki.isa.constants", "nki.language.dtypes", "nki.collectives"} <= set(ga.implemented)
    assert "nki.compiler" in ga.not_simulated  # importable, but AWS's compiler is not simulated
    # the compiler's submodules import (public code imports them) and refuse every name
    assert "nki.compiler.kernel_builder" in ga.not_simulated
    assert "nki.compiler.frontend" in ga.implemented  # trnsim's tracer is its frontend
    assert "neuronxcc.nki.isa.constants" in cov.path_coverage("beta1").implemented
    assert cov.coverage_data("ga")["nki.isa.constants"].percent == 100
    assert "module paths:" in cov.format_coverage("ga")


def test_compiler_module_says_it_is_not_simulated():
    import nki.compiler

    with pytest.raises(UnsupportedError,
                       match=r"nki\.compiler\.ncc_driver\.CompiledKernel.*nki\.simulate"):
        _ = nki.compiler.ncc_driver.CompiledKernel
    with pytest.raises(UnsupportedError, match=r"nki\.compiler\.neff.*nki\.simulate"):
        _ = nki.compiler.neff


# ---------------------------------------------------------------- neuron_dtypes
def test_neuron_dtypes_static_cast_rounds_like_the_device():
    import neuron_dtypes as dt

    x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, -0.0, 3.0e38, np.nan], dtype=np.float32)
    bf = dt.static_cast(x, dt.bfloat16)
    assert bf.dtype == ml_dtypes.bfloat16
    # 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even (1); 1 + 3*2^-8 goes up to 1 + 2^-6
    np.testing.assert_array_equal(bf[:3].astype(np.float32), [1.0, 1.0, 1 + 2**-6])
    assert np.signbit(bf[3]) and np.isnan(bf[5])
    assert dt.static_cast(bf, np.float32).dtype == np.float32
    ints = dt.static_cast(np.array([2.5, 3.5, -7.0, 300.0]), nl.int8)
    np.testing.assert_array_equal(ints, [2, 4, -7, 127])  # ties to even, saturating
    assert dt.static_cast(np.array([True, False]), np.uint8).tolist() == [1, 0]


def test_neuron_dtypes_sizes_finfo_and_float_test():
    import neuron_dtypes as dt

    assert dt.sizeinbytes(np.float32) == 4
    assert dt.sizeinbytes(nl.float8_e4m3) == 1
    assert dt.sizeinbytes(dt.float8_e4m3fn_x4) == 4
    assert dt.sizeinbytes(nl.float4_e2m1fn_x4) == 2
    info = dt.finfo(nl.bfloat16)
    assert info.dtype == np.dtype(ml_dtypes.bfloat16)
    assert float(info.max) == float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    assert float(dt.finfo(dt.float8_e4m3).max) == 240.0  # IEEE-style e4m3 (trnsim.dtypes)
    assert dt.is_float_type(np.dtype(ml_dtypes.bfloat16)) and dt.is_float_type(np.float64)
    assert not dt.is_float_type(np.int32) and not dt.is_float_type(dt.float8_e4m3fn_x4)
    with pytest.raises(TypeError, match="not a float"):
        dt.finfo(np.int32)


@pytest.mark.parametrize(("x4", "elem"), [("float8_e4m3fn_x4", ml_dtypes.float8_e4m3fn),
                                          ("float8_e5m2_x4", ml_dtypes.float8_e5m2),
                                          ("float4_e2m1fn_x4", ml_dtypes.float4_e2m1fn)])
def test_neuron_dtypes_packs_and_unpacks_mx_x4(x4, elem):
    import neuron_dtypes as dt

    codes = np.arange(8 * 16) % (16 if "float4" in x4 else 100)
    vals = codes.astype(np.uint8).view(elem).astype(np.float32).reshape(8, 16)
    vals[np.isnan(vals)] = 0
    packed = dt.static_cast(vals, getattr(dt, x4))
    assert packed.shape == (8, 4)
    assert packed.dtype == getattr(dt, x4) and packed.dtype.metadata["nki_dtype"] == x4
    # element j of a group of 4 sits in bits [j*w, (j+1)*w) of its word
    w = 4 if "float4" in x4 else 8
    first = (int(packed[0, 0]) >> w) & ((1 << w) - 1)
    assert first == vals[0, 1:2].astype(elem).view(np.uint8)[0] & ((1 << w) - 1)
    np.testing.assert_array_equal(dt.static_cast(packed, np.float32), vals)


def test_packed_array_keeps_its_dtype_through_a_kernel():
    """A tagged x4 host array arrives as an x4 tensor; the returned words are tagged again."""
    import neuron_dtypes as dt

    seen = []

    def kernel(w):
        seen.append(w.dtype)
        t = nl.ndarray(w.shape, w.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=w)
        out = nl.ndarray(w.shape, w.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    vals = np.linspace(-2, 2, 128 * 8, dtype=np.float32).reshape(128, 8)
    packed = dt.static_cast(vals, dt.float8_e4m3fn_x4)
    out = nki.simulate(kernel)(packed)
    assert seen == [nl.float8_e4m3fn_x4]
    assert out.dtype.metadata["nki_dtype"] == "float8_e4m3fn_x4"
    np.testing.assert_array_equal(dt.static_cast(out, np.float32),
                                  dt.static_cast(packed, np.float32))
    assert nki.simulate(kernel)(packed.view(np.uint32)).dtype.metadata is None  # bare words


# ---------------------------------------------------------------- the harness alias
HARNESS = """
    import builtins, sys
    import numpy as np
    from trnsim.aliases import install_harness_aliases
    install_harness_aliases()
    # the imports and sys.modules aliasing of nki-library's simulation harness
    import nki_cpu_simulator.nki.builtin as sim_builtin
    import nki_cpu_simulator.nki.compiler as sim_ncc
    import nki_cpu_simulator.nki.isa as sim_nisa
    import nki_cpu_simulator.nki.isa.constants as sim_nisa_constants
    import nki_cpu_simulator.nki.language as sim_nl
    import nki_cpu_simulator.nki.language.dtypes as sim_dtypes
    import nki_cpu_simulator.nki.tensor as sim_ntensor
    import nki_cpu_simulator.nki.typing as sim_nt
    from nki_cpu_simulator import nki as sim_nki
    builtins.builtin = sim_builtin
    for name, mod in {"nki": sim_nki, "nki.language": sim_nl, "nki.isa": sim_nisa,
                      "nki.isa.constants": sim_nisa_constants, "nki.typing": sim_nt,
                      "nki.compiler": sim_ncc, "nki.dtype": sim_dtypes,
                      "nki.tensor": sim_ntensor}.items():
        sys.modules[name] = mod
    import nki, nki.isa as nisa, nki.language as nl, nki.dtype as nt
    import neuron_dtypes as dt
    from nki.isa.constants import oob_mode
    from nki.collectives import ReplicaGroup
    import trnsim.nki

    @nki.jit
    def scale(x):
        n = nl.num_programs(0) if nl.program_ndim() else 1
        rows = x.shape[0] // n
        r0 = nl.program_id(0) * rows if nl.program_ndim() else 0
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(rows // 128):
            t = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
            rs = slice(r0 + 128 * i, r0 + 128 * (i + 1))
            nisa.dma_copy(dst=t, src=x[rs, :], oob_mode=oob_mode.error)
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
            nisa.dma_copy(dst=out[rs, :], src=t)
        return out

    x = dt.static_cast(np.arange(256 * 4).reshape(256, 4) / 8, nt.bfloat16)
    for lnc in (1, 2):
        out = nki.cpu_simulate(scale)[lnc](x=x)
        assert out.dtype == nt.bfloat16 and np.array_equal(out, 2 * x.astype(np.float32)), lnc
    assert sim_nki is trnsim.nki and builtin.isa is nisa and nt.float8_e4m3 == nl.float8_e4m3
    assert sim_nisa_constants.oob_mode is nisa.oob_mode and ReplicaGroup is not None
    from trnsim.nki.runner import default_chip_name
    print(default_chip_name())
"""


def test_harness_alias_runs_a_kernel_like_nki_librarys_harness():
    r = _run(HARNESS, NKI_NC_VERSION="gen3", NEURON_PLATFORM_TARGET_OVERRIDE="")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["trn2"]  # NKI_NC_VERSION=gen3 (what the harness sets) -> trn2


def test_harness_alias_leaves_a_real_simulator_alone(tmp_path):
    (tmp_path / "nki_cpu_simulator").mkdir()
    (tmp_path / "nki_cpu_simulator" / "__init__.py").write_text("REAL = True\n")
    r = _run(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from trnsim.aliases import install_harness_aliases
        print(install_harness_aliases())
        import nki_cpu_simulator
        print(nki_cpu_simulator.REAL)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["[]", "True"]


def test_kernel_writing_a_non_contiguous_input_updates_it():
    """nki-library's harness passes transposed views as inputs; writes reach them."""

    def kernel(x):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=x, src=t)
        return x

    base = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    x = base.T  # (128, 8), not C-contiguous
    nki.simulate(kernel)(x)
    np.testing.assert_array_equal(base, np.arange(8 * 128).reshape(8, 128) + 1)
