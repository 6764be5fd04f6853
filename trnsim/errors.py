"""Exception hierarchy of trnsim. Imports nothing of ours except SourceLocation typing."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trnsim.program import SourceLocation


class TrnsimError(Exception):
    """Base class of every error trnsim raises on purpose."""


class SpecError(TrnsimError):
    """Data under isa/ (or a user's chip file) is malformed: names the file and key path."""


class KernelError(TrnsimError):
    """The user's kernel is wrong. Carries the user's source location when known."""

    def __init__(self, message: str, loc: SourceLocation | None = None):
        self.message = message
        self.loc = loc
        super().__init__(self._render())

    def _render(self) -> str:
        if self.loc is None:
            return self.message
        return f"{self.loc.describe()}\n{self.message}"

    def with_loc(self, loc: SourceLocation | None) -> KernelError:
        """Attach a location if none is set yet (used when re-raising at the API boundary)."""
        if self.loc is None and loc is not None:
            self.loc = loc
            self.args = (self._render(),)
        return self


class ConstraintError(KernelError):
    """An instruction breaks a hardware rule: shape, dtype, memory space, engine."""


class AllocationError(KernelError):
    """A memory space is full: says requested, free and capacity."""


class LivenessMiss(AllocationError):
    """A tile trnsim freed after what looked like its last use was used again; the runner runs
    the launch again keeping it (trnsim.nki.liveness). `key` names the tile across runs."""

    def __init__(self, message: str, key: tuple) -> None:
        super().__init__(message)
        self.key = key


class HostMemoryError(AllocationError):
    """The host has too little RAM for what the simulated memories must hold: says the bytes
    needed and available (raised before the memory is touched, never an OOM kill)."""


class OutOfBoundsError(KernelError):
    """A view reaches outside its buffer, or a runtime index is out of range."""


class RuntimeIndexError(OutOfBoundsError, IndexError):
    """A runtime index (an indirect DMA's index tile, a dynamic offset) is out of range.

    Also an IndexError; `index_text` is numpy's text for the flattened tensor ("index 66048
    is out of bounds for axis 0 with size 65536"), which AWS's Beta-1 simulator raises as a
    plain IndexError (the Beta-1 front end re-raises it so)."""

    def __init__(self, message: str, index_text: str, loc: SourceLocation | None = None):
        self.index_text = index_text
        super().__init__(message, loc)


class UnsupportedError(TrnsimError, NotImplementedError):
    """A feature that trnsim does not simulate (yet); says what is supported."""

    def __init__(self, message: str, loc: SourceLocation | None = None):
        self.message = message
        self.loc = loc
        text = message if loc is None else f"{loc.describe()}\n{message}"
        super().__init__(text)


class ConfigValueError(KernelError, ValueError):
    """A kernel configuration value outside its mode (nki.compiler.CompileConfig): also the
    ValueError the NKI docs name, with the user's line."""


class ConfigTypeError(KernelError, TypeError):
    """A kernel configuration value of the wrong type: also the documented TypeError."""


class UsageError(TrnsimError):
    """A command-line argument or input file is unusable: names it and says what is allowed."""


class SimulationWarning(UserWarning):
    """Suspicious but legal kernel behaviour (e.g. accumulate onto never-written PSUM)."""
