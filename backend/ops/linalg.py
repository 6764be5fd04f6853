"""Matrix products: mm, addmm, bmm, baddbmm, addmv, mv, dot, addbmm, addr."""

from __future__ import annotations

from trnsim.backend.registry import cpu_overloads, reference_only

reference_only(*cpu_overloads("mm", "addmm", "bmm", "baddbmm", "addmv", "mv", "dot", "vdot",
                              "addbmm", "addr", "_addmm_activation"), group="linalg")
