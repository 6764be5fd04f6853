"""The fuzzer (issue 13.5): random valid kernels (both APIs, every tile dtype incl. bf16 and
fp8 inputs, strided, offset and .ap views, loops, matmuls) must equal the float64 rounding
reference exactly; random invalid ones (one documented rule broken on one line) must raise
a trnsim error at that line. The default run draws a fixed set of examples; the slow tier
(`pytest -m slow`) draws FUZZ_EXAMPLES (default 10,000) valid and half as many invalid."""

from __future__ import annotations

import os
import warnings

import fuzz_kernels as fk
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from source_paths import assert_no_internal_path

from trnsim import errors
from trnsim.errors import SimulationWarning, TrnsimError

SLOW_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "10000"))
FAST = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
SLOW = settings(max_examples=SLOW_EXAMPLES, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))


def check_valid(spec: fk.Spec, folder: str) -> None:
    a, b = fk.inputs(spec)
    want = fk.reference(spec, a, b)
    # overflow follows another rule per dtype: such draws do not count as examples
    assume(fk.in_range(spec, want))
    lines = fk.source(spec)
    mod, _ = fk.load(lines, folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SimulationWarning)
        got = fk.launch(spec, mod, a, b)
    got = np.asarray(got).astype(np.float32)
    assert got.shape == want.shape, fk.describe(spec, lines)
    np.testing.assert_array_equal(got, want.astype(np.float32), err_msg=fk.describe(spec, lines))


def applicable(rule: str, api: str):
    """Specs of `api` that `rule` can be broken in."""
    return fk.specs(api).filter(fk.INVALID[rule][0])


def check_invalid(spec: fk.Spec, rule: str, folder: str) -> None:
    _, breaker, classes, words = fk.INVALID[rule]
    lines, marker = breaker(spec, fk.source(spec))
    spec.broken = rule
    mod, path = fk.load(lines, folder)
    a, b = fk.inputs(spec)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SimulationWarning)
            fk.launch(spec, mod, a, b)
    except TrnsimError as e:
        exc = e
    except Exception as e:  # any other exception is the failure being reported
        pytest.fail(f"{rule}: a non-trnsim {type(e).__name__}: {e}\n" + fk.describe(spec, lines))
    else:
        pytest.fail(f"{rule}: no error\n" + fk.describe(spec, lines))
    text = str(exc)
    assert type(exc).__name__ in classes or isinstance(
        exc, tuple(getattr(errors, c) for c in classes)), f"{type(exc).__name__}: {text}"
    assert any(w in text.lower() for w in words), text
    assert exc.loc is not None and exc.loc.filename == path, text
    assert exc.loc.lineno == fk.line_of(lines, marker), (text, fk.describe(spec, lines))
    assert_no_internal_path(text)


@FAST
@given(spec=fk.specs())
def test_valid_kernels_match_the_reference(spec, tmp_path_factory):
    check_valid(spec, str(tmp_path_factory.getbasetemp()))


RULES = [(rule, api) for rule in fk.INVALID for api in ("ga", "b1")
         if not (rule.startswith("DMA never reads PSUM") and api == "b1")]


@pytest.mark.parametrize(("rule", "api"), RULES)
@settings(FAST, max_examples=6)
@given(data=st.data())
def test_invalid_kernels_raise_at_the_line(rule, api, data, tmp_path_factory):
    spec = data.draw(applicable(rule, api), label="spec")
    check_invalid(spec, rule, str(tmp_path_factory.getbasetemp()))


@pytest.mark.slow
@SLOW
@given(spec=fk.specs())
def test_valid_kernels_slow(spec, tmp_path_factory):
    check_valid(spec, str(tmp_path_factory.getbasetemp()))


@pytest.mark.slow
@pytest.mark.parametrize(("rule", "api"), RULES)
@settings(SLOW, max_examples=max(1, SLOW_EXAMPLES // 2 // len(RULES)))
@given(data=st.data())
def test_invalid_kernels_slow(rule, api, data, tmp_path_factory):
    spec = data.draw(applicable(rule, api), label="spec")
    check_invalid(spec, rule, str(tmp_path_factory.getbasetemp()))
