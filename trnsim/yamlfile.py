"""Reading the data files (isa/, chip descriptions): YAML through libyaml when PyYAML has it.

The pure-Python loader takes a noticeable part of a short run's start-up on the ISA records;
libyaml's CSafeLoader builds the same safe types (dicts, lists, str, int, float, bool, None).
"""

from __future__ import annotations

from typing import IO, Any

import yaml

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(source: str | IO[str]) -> Any:
    """yaml.safe_load, with the C loader when available."""
    return yaml.load(source, Loader=_Loader)
