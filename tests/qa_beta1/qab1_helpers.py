"""Helpers of the Beta-1 QA tests: run a buggy B1 kernel and check that the error is a trnsim
error with the expected B1 code, located at the kernel's `# BUG` line, with no simulator path."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap

import neuronxcc.nki as nki
import numpy as np
import pytest
from source_paths import assert_no_internal_path

from trnsim.errors import KernelError, TrnsimError, UnsupportedError

X = np.random.default_rng(7).standard_normal((128, 512)).astype(np.float32)


def bug_lines(kernel) -> list[int]:
    """Line numbers of the `# BUG` marker and of the first line of the statement holding it."""
    src, start = inspect.getsourcelines(kernel)
    marked = {start + i for i, text in enumerate(src) if "# BUG" in text}
    assert marked, f"kernel {kernel.__name__} has no '# BUG' marker"
    tree = ast.parse(textwrap.dedent("".join(src)))
    spans = [
        (start + n.lineno - 1, start + n.end_lineno - 1)
        for n in ast.walk(tree)
        if isinstance(n, ast.stmt) and not isinstance(n, ast.FunctionDef)
    ]
    lines = set(marked)
    for m in marked:
        inside = [sp for sp in spans if sp[0] <= m <= sp[1]]
        if inside:
            lines.add(min(inside, key=lambda sp: sp[1] - sp[0])[0])
    return sorted(lines)


def expect_b1_error(kernel, code, *words, args=(X,), grid=None, exc_type=KernelError):
    """Run `kernel` (B1 style); it must raise `exc_type` carrying B1 `code` (None: no code
    required) at its `# BUG` line, with every regex of `words` in the message."""
    k = nki.jit(kernel)
    if grid is not None:
        k = k[grid]
    try:
        k(*args)
    except TrnsimError as e:
        exc = e
    except Exception as e:
        pytest.fail(f"kernel mistake raised a non-trnsim {type(e).__name__}: {e}")
    else:
        pytest.fail(f"{kernel.__name__}: no error raised")
    assert isinstance(exc, (exc_type, UnsupportedError)), f"{type(exc).__name__}: {exc}"
    text = str(exc)
    assert_no_internal_path(text)
    if code is not None:
        assert getattr(exc, "code", None) == code, text
        assert f"[{code}]" in text, text
    assert exc.loc is not None, text
    assert exc.loc.lineno in bug_lines(kernel), (exc.loc.lineno, bug_lines(kernel), text)
    for w in words:
        assert re.search(w, text), f"{w!r} not in {text}"
    return exc
