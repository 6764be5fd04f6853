"""Helpers for the QA error tests: run a buggy kernel, check the error class, the user's line,
the message words and that no simulator path leaks into the text."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap

import nki
import numpy as np
import pytest
from source_paths import assert_no_internal_path

from trnsim.errors import KernelError, TrnsimError, UnsupportedError

X = np.ones((128, 64), np.float32)


def bug_lines(kernel) -> list[int]:
    """Absolute line numbers of the statements marked `# BUG` in the kernel's source: the marked
    line itself and the first line of the statement that contains it (ruff format may split a
    long call over several lines)."""
    fn = getattr(kernel, "fn", kernel)
    src, start = inspect.getsourcelines(fn)
    marked = {start + i for i, text in enumerate(src) if "# BUG" in text}
    assert marked, f"kernel {fn.__name__} has no '# BUG' marker"
    tree = ast.parse(textwrap.dedent("".join(src)))
    spans = [
        (start + node.lineno - 1, start + node.end_lineno - 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.stmt) and not isinstance(node, ast.FunctionDef)
    ]
    lines = set(marked)
    for m in marked:  # the innermost statement containing the marker
        inner = min((sp for sp in spans if sp[0] <= m <= sp[1]), key=lambda sp: sp[1] - sp[0])
        lines.add(inner[0])
    return sorted(lines)


def expect_error(kernel, exc_type, *words, args=(X,), **sim_options):
    """Run `kernel`; it must raise `exc_type` (a trnsim error) at its `# BUG` line, whose
    message contains every regex in `words`. Returns the exception."""
    assert issubclass(exc_type, (KernelError, UnsupportedError))
    try:
        nki.simulate(kernel, **sim_options)(*args)
    except TrnsimError as e:
        exc = e
    except Exception as e:
        pytest.fail(f"kernel mistake raised a non-trnsim {type(e).__name__}: {e}")
    else:
        pytest.fail(f"{getattr(kernel, '__name__', kernel)}: no error raised")
    assert isinstance(exc, exc_type), (
        f"expected {exc_type.__name__}, got {type(exc).__name__}: {exc}"
    )
    text = str(exc)
    assert_no_internal_path(text)
    loc = getattr(exc, "loc", None)
    assert loc is not None, f"error has no source location: {text}"
    assert loc.lineno in bug_lines(kernel), (
        f"error at line {loc.lineno}, expected {bug_lines(kernel)}"
    )
    message = getattr(exc, "message", text)
    for w in words:
        assert re.search(w, message), f"{w!r} not in message: {message}"
    return exc
