"""TensorE throttling (Trn2/Trn3): a utilization cap that ramps up and re-engages after idling.

Documented behaviour (trainium-hw.md B.2, NX-SUMMARY, NX-GLOSS): the Tensor Engine starts at
about 50 % of its maximum utilization and ramps to 100 % over ~3 us; if utilization falls below
50 % within any ~3 us window, the cap re-engages. Modelled as a cap c(t) = f0 + (1 - f0) *
min(1, (t - ramp_start) / ramp) that stretches every MultiplyMoving's II by 1 / c(t); the ramp
restarts when the busy fraction of the trailing window (since the ramp began) drops below the
threshold. Knows nothing about instructions beyond their start and II.
"""

from __future__ import annotations

import math
from collections import deque

from trnsim.chipspec import ThrottleSpec


class Throttle:
    """One core's TensorE cap. `stretch` is called in issue order with each MM's start and II."""

    def __init__(self, spec: ThrottleSpec, ticks_per_ns: float):
        self.enabled = spec.enabled
        self.f0 = spec.initial_fraction
        self.ramp = max(1, round(spec.ramp_ns * ticks_per_ns))
        self.window = max(1, round(spec.window_ns * ticks_per_ns))
        self.threshold = spec.reengage_below
        self.ramp_start: int | None = None
        self._busy: deque[tuple[int, int]] = deque()  # MM issue intervals, in order
        self._busy_sum = 0
        self.throttled_ticks = 0
        self.samples: list[tuple[int, float]] = []  # (tick, cap) when the cap changes
        self._full_cap = self.f0 + (1 - self.f0) * 1.0

    def cap(self, t: int) -> float:
        if not self.enabled or self.ramp_start is None:
            return 1.0
        return self.f0 + (1 - self.f0) * min(1.0, (t - self.ramp_start) / self.ramp)

    def stretch(self, start: int, ii: int) -> int:
        """The II in ticks of a MultiplyMoving issued at `start`, after the cap."""
        if not self.enabled:
            return ii
        ramp_start = self.ramp_start
        if ramp_start is None:
            ramp_start = self.ramp_start = start
        else:
            # The busy fraction of [max(start - window, ramp_start), start], judged once that
            # span is half a window long: below the threshold, the ramp restarts.
            lo = start - self.window
            if lo < ramp_start:
                lo = ramp_start
            busy = self._busy
            while busy and busy[0][1] <= lo:
                s, e = busy.popleft()
                self._busy_sum -= e - s
            if start - lo >= self.window // 2:
                used = self._busy_sum
                if busy and busy[0][0] < lo:
                    used -= lo - busy[0][0]
                if used / (start - lo) < self.threshold:
                    ramp_start = self.ramp_start = start
        if start - ramp_start >= self.ramp:  # ramped up: what cap() gives, without the division
            cap = self._full_cap
        else:
            cap = self.f0 + (1 - self.f0) * min(1.0, (start - ramp_start) / self.ramp)
        out = math.ceil(ii / cap)
        self.throttled_ticks += out - ii
        self._busy.append((start, start + out))
        self._busy_sum += out
        samples = self.samples
        # A sample when the cap changes by at least a percent.
        if not samples or (
            samples[-1][1] != cap and round(samples[-1][1] * 100) != round(cap * 100)
        ):
            samples.append((start, cap))
        return out
