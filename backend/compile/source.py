"""Where a graph node came from: the user's source line in the stack trace Dynamo records.

Dynamo stores, on every node it traces, the Python stack of the frame it compiled (the
`stack_trace` meta, kept by AOTAutograd on the ATen nodes of both the forward and, through
the autograd sequence numbers, the backward graph). The user's line is the innermost frame
outside torch: `F.linear` and `nn.Module.__call__` are torch's, the `self.fc1(x)` line
that called them is the user's.
"""

from __future__ import annotations

import linecache
import os
import re

import torch

from trnsim.program import SourceLocation

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>.+)$')


def frames(stack_trace: str | None) -> list[SourceLocation]:
    """The frames of a recorded stack trace, outermost first."""
    out = []
    for line in (stack_trace or "").splitlines():
        m = _FRAME.match(line)
        if m:
            fname, lineno = m["file"], int(m["line"])
            out.append(SourceLocation(fname, lineno, m["fn"].strip(),
                                      linecache.getline(fname, lineno).strip()))
    return out


def user_frame(stack_trace: str | None) -> SourceLocation | None:
    """The innermost frame outside torch (and outside this package), or None."""
    for loc in reversed(frames(stack_trace)):
        path = os.path.abspath(loc.filename)
        if not loc.filename.startswith("<") and not path.startswith((_TORCH_DIR, _HERE)):
            return loc
    return None


def node_location(node: torch.fx.Node) -> SourceLocation | None:
    return user_frame(node.meta.get("stack_trace"))


def graph_frame(gm: torch.fx.GraphModule) -> SourceLocation | None:
    """The frame Dynamo compiled into this graph: the outermost frame of its first traced
    node (a graph of a graph break's resume function names `torch_dynamo_resume_in_...`)."""
    for node in gm.graph.nodes:
        got = frames(node.meta.get("stack_trace"))
        if got:
            return got[0]
    return None
