"""Where the simulator's own files live, for tests that a message names none of them.

The check compares with the package's real install directory, never with a path fragment
such as the package's name between slashes: a checkout cloned into a folder named `trnsim`
(git's default) puts that fragment into every user path too.
"""

from __future__ import annotations

import functools
import os
import re

import trnsim

TRNSIM_DIR = os.path.dirname(os.path.abspath(trnsim.__file__)) + os.sep


@functools.cache
def _internal_relpaths() -> tuple[str, ...]:
    """'trnsim/nki/runner.py', ...: each simulator module as a path relative to the package's
    parent (how a shortened traceback or a relative path would name it)."""
    parent = os.path.dirname(TRNSIM_DIR.rstrip(os.sep))
    found = []
    for root, _dirs, files in os.walk(TRNSIM_DIR):
        found += [os.path.relpath(os.path.join(root, f), parent) for f in files
                  if f.endswith(".py")]
    return tuple(sorted(found))


@functools.cache
def _relative_pattern() -> re.Pattern:
    """A module's relative path standing on its own (not the tail of a user's absolute path
    such as a core.py under a user's own folder named trnsim)."""
    names = "|".join(re.escape(p) for p in _internal_relpaths())
    return re.compile(rf"(?<![\w/.~-])(?:{names})")


def internal_paths_in(text: str) -> list[str]:
    """The simulator's own file paths that occur in `text` (absolute dir or relative module)."""
    hits = [TRNSIM_DIR] if TRNSIM_DIR in text else []
    return hits + _relative_pattern().findall(text)


def assert_no_internal_path(text: str) -> None:
    """A user-facing message must not point into the simulator's own files."""
    hits = internal_paths_in(text)
    assert not hits, f"message names simulator files {hits}:\n{text}"
