"""Shared helpers of the kernel library: argument errors reported at the kernel's caller."""

from __future__ import annotations

import linecache
import os
import sys
from typing import NoReturn

from trnsim.errors import ConstraintError
from trnsim.program import SourceLocation, is_internal_file

_LIBRARY_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def caller_location() -> SourceLocation | None:
    """The first stack frame outside trnsim and this kernel library: where the user called
    the kernel (nki.simulate(kernel)(...), or kernel(...))."""
    frame = sys._getframe(1)
    while frame is not None:
        fname = frame.f_code.co_filename
        path = os.path.abspath(fname)
        if not (
            is_internal_file(fname) or path.startswith(_LIBRARY_DIR) or fname.startswith("<frozen")
        ):
            code = linecache.getline(fname, frame.f_lineno).strip()
            return SourceLocation(fname, frame.f_lineno, frame.f_code.co_name, code)
        frame = frame.f_back
    return None


def fail(message: str) -> NoReturn:
    """Reject a kernel's arguments: ConstraintError located at the kernel's caller."""
    raise ConstraintError(message, caller_location())
