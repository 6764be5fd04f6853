"""Checks of the `trnsim` command's arguments, made before anything is simulated: each refusal
is one UsageError naming the argument and what is allowed."""

from __future__ import annotations

import os
import tokenize
import zipfile

from trnsim.errors import UsageError
from trnsim.trace_files import TRACE_EXTS, check_readable

DMA_ROWS = ("queue", "engine")


def check_script(path: str) -> None:
    """A script as `python PATH` runs it: Python source, or a folder or zip archive holding a
    __main__.py."""
    if os.path.isdir(path):
        if not os.path.isfile(os.path.join(path, "__main__.py")):
            raise UsageError(f"script '{path}' is a directory without a __main__.py (give a "
                             "Python file, or a folder or zip archive holding __main__.py)")
        return
    check_readable(path, "script")
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            if "__main__.py" not in z.namelist():
                raise UsageError(f"script '{path}' is a zip archive without a __main__.py")
        return
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    if b"\0" in head:
        raise UsageError(f"script '{path}' is not a Python script (binary content)")
    try:
        with tokenize.open(path) as f:  # honours a PEP 263 coding line, as python does
            f.read(1 << 16)
    except (SyntaxError, UnicodeDecodeError, LookupError) as e:
        raise UsageError(f"script '{path}' is not readable Python source ({e})") from None


def check_output(path: str, option: str, exts: tuple[str, ...]) -> None:
    """An output file: a known extension, in an existing, writable folder."""
    if not path:
        raise UsageError(f"{option} '': give a file name ending in {' or '.join(exts)}")
    ext = os.path.splitext(path)[1].lower()
    if ext not in exts:
        raise UsageError(f"{option} '{path}': unknown extension '{ext}' (allowed: "
                         f"{', '.join(exts)})")
    if os.path.isdir(path):
        raise UsageError(f"{option} '{path}' is a directory; give a file name")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"{option} '{path}': folder '{os.path.dirname(path) or folder}' does "
                         "not exist (create it first)")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"{option} '{path}': folder '{folder}' is not writable")


def check_trace_output(path: str) -> None:
    check_output(path, "-o", TRACE_EXTS)


def check_png(path: str | None, option: str = "--png") -> None:
    if path is not None:
        check_output(path, option, (".png",))


def check_chip(name: str | None) -> None:
    """--chip: a built-in chip or platform name (None: the default)."""
    from trnsim.nki.runner import PLATFORM_ALIASES

    if name is not None and name.strip().lower() not in PLATFORM_ALIASES:
        raise UsageError(f"--chip {name!r} is not a chip (allowed: "
                         f"{', '.join(PLATFORM_ALIASES)})")


def check_dma_rows(value: str) -> None:
    if value not in DMA_ROWS:
        raise UsageError(f"--dma-rows {value!r}: allowed {' or '.join(DMA_ROWS)}")


def check_allocation(value: str | None) -> None:
    """--allocation: one of the compiler rule's policies (None: the chip's)."""
    from trnsim.timing.compiler import ALLOCATIONS

    if value is not None and value not in ALLOCATIONS:
        raise UsageError(f"--allocation {value!r} is not an allocation policy (allowed: "
                         f"{', '.join(ALLOCATIONS)})")


def check_rules_off(names: list[str]) -> None:
    """--rule-off: each a compiler rule that acts on the timing of a recorded launch (the
    switches of CompilerRules; refetch_clean_blocks and evict_by_next_use act while the kernel
    runs and are switched with trnsim.profile(..., rules=...))."""
    from trnsim.timing.compiler import TIMING_RULES

    for name in names:
        if name not in TIMING_RULES:
            raise UsageError(f"--rule-off {name!r} is not a compiler rule trnsim profile can "
                             f"switch off (allowed: {', '.join(TIMING_RULES)}; "
                             "refetch_clean_blocks and evict_by_next_use act while the kernel "
                             "runs: trnsim.profile(..., rules=CompilerRules(...)))")
