"""nki.isa wrappers for scalar instructions: NKI's signature and docstring, then one `_issue` call."""

from __future__ import annotations



