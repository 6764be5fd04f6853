"""Instruction semantics registry: one pure-numpy function per NKI instruction.

A semantics function is `fn(core, *, engine, **operands_and_attrs) -> None`; it reads its input
Views and writes its output Views. It never reads costs or time.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from functools import cache

SemanticsFn = Callable[..., None]
_REGISTRY: dict[str, SemanticsFn] = {}  # filled once at import of the family modules


def semantics(name: str) -> Callable[[SemanticsFn], SemanticsFn]:
    """Register `fn` as the meaning of instruction `name`."""

    def deco(fn: SemanticsFn) -> SemanticsFn:
        if name in _REGISTRY and _REGISTRY[name] is not fn:
            raise RuntimeError(f"semantics for {name} registered twice")
        _REGISTRY[name] = fn
        return fn

    return deco


@cache
def _load_families() -> tuple[str, ...]:
    mods = []
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
            mods.append(info.name)
    return tuple(mods)


def lookup(name: str) -> SemanticsFn | None:
    _load_families()
    return _REGISTRY.get(name)


def registered() -> tuple[str, ...]:
    _load_families()
    return tuple(sorted(_REGISTRY))


EngineRule = Callable[..., "str | None"]
_ENGINE_RULES: dict[str, EngineRule] = {}


def engine_rule(name: str) -> Callable[[EngineRule], EngineRule]:
    """Register how instruction `name` picks its engine when the user leaves it unknown.

    `fn(chip, operands, attrs) -> engine name or None` (None: the record's first engine).
    """

    def deco(fn: EngineRule) -> EngineRule:
        _ENGINE_RULES[name] = fn
        return fn

    return deco


def default_engine(name: str, chip: object, operands: dict, attrs: dict) -> str | None:
    _load_families()
    rule = _ENGINE_RULES.get(name)
    return rule(chip, operands, attrs) if rule is not None else None
