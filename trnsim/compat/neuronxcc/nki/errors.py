"""neuronxcc.nki.errors: the Beta-1 error-code catalogue (a documentation module in B1).

Each code is a module attribute holding its one-line description; trnsim raises KernelError
subclasses whose message ends with `[code]` and whose `.code` is the code.
"""

from __future__ import annotations

from trnsim.compat.neuronxcc.nki._errors import CODES

globals().update(CODES)

__all__ = sorted(CODES)
