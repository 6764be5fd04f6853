"""Which tensor last wrote each PSUM fp32 word (the accumulate rule of semantics/_tensor_rules.py).
Knows numpy only; nothing about time.

`PsumWriters` holds a psum_tag per word (0: nothing wrote since the allocation covering it) and
remembers one rectangle of words known to hold a single tag throughout: the last matmul result
stored through `set_rect`. Every other write goes through `__setitem__` and forgets it, so a
remembered rectangle is always exactly what reading the tags back would give. Consecutive matmuls
of one accumulation group (same dst, same tag) then skip the per-word comparison and the store
of tags that are already there: two passes over 512 KiB per 128x512 matmul.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class PsumWriters:
    """Per PSUM fp32 word, the psum_tag of the tensor that last wrote it; indexable like the
    [partitions, words] int64 array it wraps."""

    __slots__ = ("_rect", "_shape", "_tags")

    def __init__(self, partitions: int, words: int):
        self._shape = (partitions, words)
        self._tags: np.ndarray | None = None
        self._rect: tuple[tuple, int] | None = None

    @property
    def tags(self) -> np.ndarray:
        """The [partitions, words] int64 tags, made (all 0) on first use: a timing-only launch
        never reads them, and 4 MiB of zeros per core is a measurable part of a small launch."""
        tags = self._tags
        if tags is None:
            tags = self._tags = np.zeros(self._shape, dtype=np.int64)
        return tags

    def __getitem__(self, index: Any) -> np.ndarray:
        return self.tags[index]

    def __setitem__(self, index: Any, tag: Any) -> None:
        self._rect = None
        self.tags[index] = tag

    def uniform_tag(self, rows: Any, words: Any) -> int | None:
        """The one tag every word of [rows, words] holds, if that is known without reading
        them (the rectangle of the last set_rect, untouched since); else None."""
        rect = self._rect
        if rect is None or type(rows) is not slice or type(words) is not slice:
            return None
        key = (rows.start, rows.stop, rows.step, words.start, words.stop, words.step)
        return rect[1] if rect[0] == key else None

    def set_rect(self, rows: Any, words: Any, tag: int) -> None:
        """tags[rows, words] = tag, remembering the rectangle when both are slices."""
        if self.uniform_tag(rows, words) == tag:
            return  # already so throughout
        self.tags[rows, words] = tag
        if type(rows) is slice and type(words) is slice:
            self._rect = ((rows.start, rows.stop, rows.step, words.start, words.stop, words.step),
                          tag)
        else:
            self._rect = None
