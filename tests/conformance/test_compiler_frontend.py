"""nki.compiler.frontend traces a kernel for a target with values off (what nki-library's
trace-only tests call: test/utils/kernel_tracer.py); the compiler's other paths import and
refuse every name with the caller's line."""

from __future__ import annotations

import io
import os

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from trnsim.coverage import path_coverage
from trnsim.errors import TrnsimError, UnsupportedError


@nki.jit
def _copy_twice(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    u = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=u, src=t)
    nisa.dma_copy(dst=out, src=u)
    return out


@nki.jit
def _shape_checked(dummy, rows: int, expected: tuple):
    t = nl.ndarray((rows, 8), nl.float32, buffer=nl.sbuf)
    assert tuple(t.shape) == tuple(expected), f"shape {t.shape} != {expected}"
    nisa.memset(dst=t, value=0.0)
    return dummy


@nki.jit
def _too_many_partitions(x):
    t = nl.ndarray((256, 8), nl.float32, buffer=nl.sbuf)  # SBUF has 128 partitions
    nisa.dma_copy(dst=t, src=x)
    return x


def _frontends():
    from nki.compiler.frontend import ParserFrontend, TracerFrontend
    return [ParserFrontend(), TracerFrontend()]


@pytest.mark.parametrize("frontend", _frontends(), ids=lambda f: type(f).__name__)
def test_compile_traces_the_program_for_the_target(frontend, tmp_path):
    x = np.ones((128, 64), np.float32)
    r = frontend.compile(_copy_twice, inputs={"x": x}, target="trn2", lnc=1,
                         artifacts_dir=str(tmp_path), dump_python_ast=True,
                         output_names=["out"])
    assert (r.target, r.lnc, r.kernel_name, r.output_names) == ("trn2", 1, "_copy_twice",
                                                                 ["out"])
    assert [ins.opcode for ins in r.program] == ["dma_copy", "tensor_copy", "dma_copy"]
    buf = io.StringIO()
    r.module.operation.print(file=buf, enable_debug_info=True, use_local_scope=True)
    lines = buf.getvalue().splitlines()
    assert len(lines) == 4 and "3 instructions" in lines[0]
    assert "tensor_copy" in lines[2] and "test_compiler_frontend.py:" in lines[2]
    with open(tmp_path / "trnsim_program.txt") as f:
        assert f.read() == buf.getvalue()
    assert "FunctionDef(" in (tmp_path / "python_ast.txt").read_text()


def test_target_names_of_the_harness_choose_the_chip():
    from nki.compiler.frontend import ParserFrontend
    x = np.ones((128, 64), np.float32)
    for target, chip in (("trn1", "trn1"), ("gen3", "trn2"), ("trn3", "trn3")):
        assert ParserFrontend().compile(_copy_twice, inputs={"x": x}, target=target).target == chip


def test_python_in_the_kernel_runs_at_trace_time():
    from nki.compiler.frontend import ParserFrontend
    d = np.zeros((1,), np.float32)
    ParserFrontend().compile(_shape_checked, inputs={"dummy": d, "rows": 64,
                                                     "expected": (64, 8)}, target="trn2")
    with pytest.raises(AssertionError, match=r"shape \(64, 8\) != \(32, 8\)"):
        ParserFrontend().compile(_shape_checked, inputs={"dummy": d, "rows": 64,
                                                         "expected": (32, 8)}, target="trn2")


def test_rule_violations_are_reported_at_the_kernel_line():
    from nki.compiler.frontend import ParserFrontend
    with pytest.raises(TrnsimError) as err:
        ParserFrontend().compile(_too_many_partitions,
                                 inputs={"x": np.ones((256, 8), np.float32)}, target="trn2")
    assert "test_compiler_frontend.py" in str(err.value) and "128" in str(err.value)


def test_inputs_must_be_a_dict():
    from nki.compiler.frontend import ParserFrontend
    with pytest.raises(TrnsimError, match="inputs= is a dict"):
        ParserFrontend().compile(_copy_twice, inputs=[np.ones((128, 64), np.float32)])


def test_compiler_paths_import_and_refuse_with_the_callers_line():
    import nki.compiler.kernel_builder
    import nki.runtime
    with pytest.raises(UnsupportedError) as err:
        from nki.compiler.ncc_driver import CompiledKernel  # noqa: F401
    text = str(err.value)
    assert os.path.basename(__file__) in text and "NEFF" in text and "ParserFrontend" in text
    from nki.compiler import frontend  # a submodule, not a refused name
    assert frontend.ParserFrontend is not None
    with pytest.raises(UnsupportedError, match=r"nki\.compiler\.anything"):
        nki.compiler.anything  # noqa: B018


def test_coverage_counts_the_frontend_as_implemented_and_the_driver_apart():
    cov = path_coverage("ga")
    assert "nki.compiler.frontend" in cov.implemented
    assert {"nki.compiler", "nki.compiler.ncc_driver", "nki.runtime"} <= set(cov.not_simulated)
    assert cov.missing == []
