"""Beta-1 index expressions: affine combinations of nl.arange / nl.mgrid indices (those live in
_arange), and mask predicates.

An IndexExpr is an affine function of an instruction's iteration indices,
value(i) = const + sum_k coefs[k] * i_k, over a NumPy-broadcast shape (a size-1 axis has
coefficient 0). Loop variables and nl.program_id are plain Python ints in trnsim, so
`i * 128 + nl.arange(128)[:, None]` is an IndexExpr with const i * 128.

A Predicate is a conjunction (`&`) of comparisons `expr <op> 0`. `box()` turns the terms
that constrain a single axis into per-axis intervals (the rectangular region an instruction
is shrunk to); terms over several axes (e.g. `i_p < i_f`) are returned as residuals.
Knows nothing about memory or instructions.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from trnsim.compat.neuronxcc.nki._errors import b1_error
from trnsim.errors import ConstraintError, SimulationWarning
from trnsim.program import capture_location

_CMP = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq}
_CONDITIONS = ("if ", "if(", "elif ", "elif(", "while ", "while(", "assert ")
_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": None}


def as_int(x: Any, what: str) -> int:
    if isinstance(x, (bool, np.bool_)):
        raise b1_error(
            ConstraintError,
            "err_tile_index_add_non_integer_scalar",
            f"{what}: index expressions combine only with integers, got {x!r}",
        )
    if isinstance(x, (int, np.integer)):
        return int(x)
    raise b1_error(
        ConstraintError,
        "err_tile_index_add_non_integer_scalar",
        f"{what}: index expressions combine only with integer scalars, got "
        f"{type(x).__name__} {x!r}",
    )


def broadcast_shapes(*shapes: tuple[int, ...], what: str = "index expressions") -> tuple[int, ...]:
    """NumPy broadcast of shapes (aligned on the right); ConstraintError if incompatible."""
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for k, n in enumerate(s):
            j = rank - len(s) + k
            if n != 1 and out[j] not in (1, n):
                raise b1_error(
                    ConstraintError,
                    "err_param_shape_incompatible_with_numpy",
                    f"{what}: shapes {', '.join(map(str, map(list, shapes)))} "
                    "could not be broadcast together",
                )
            if n != 1:
                out[j] = n
    return tuple(out)


def _pad(coefs: tuple[int, ...], rank: int) -> tuple[int, ...]:
    return (0,) * (rank - len(coefs)) + tuple(coefs)


class IndexExpr:
    """An affine index expression (nl.arange, nl.mgrid components and their combinations)."""

    __slots__ = ("coefs", "const", "shape")
    __hash__ = None  # comparisons build predicates

    def __init__(self, shape: tuple[int, ...], coefs: tuple[int, ...], const: int = 0):
        self.shape = tuple(int(n) for n in shape)
        self.coefs = tuple(int(c) if n > 1 else 0 for c, n in zip(coefs, self.shape, strict=True))
        self.const = int(const)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        terms = [f"{c}*i{k}" for k, c in enumerate(self.coefs) if c]
        return f"IndexExpr({' + '.join([str(self.const), *terms])}, shape={list(self.shape)})"

    # ------------------------------------------------------------ affine arithmetic
    def _combine(self, other: Any, sign: int, what: str) -> IndexExpr:
        if hasattr(other, "_ready") and sign == 1:  # a runtime offset tile: tile + expr
            from trnsim.compat.neuronxcc.nki._indirect import DynIndex

            return DynIndex(other, self)
        if isinstance(other, IndexExpr):
            shape = broadcast_shapes(self.shape, other.shape)
            a, b = _pad(self.coefs, len(shape)), _pad(other.coefs, len(shape))
            return IndexExpr(
                shape,
                tuple(x + sign * y for x, y in zip(a, b, strict=True)),
                self.const + sign * other.const,
            )
        return IndexExpr(self.shape, self.coefs, self.const + sign * as_int(other, what))

    def __add__(self, other: Any) -> IndexExpr:
        return self._combine(other, 1, "+")

    __radd__ = __add__

    def __sub__(self, other: Any) -> IndexExpr:
        return self._combine(other, -1, "-")

    def __rsub__(self, other: Any) -> IndexExpr:
        return (-self)._combine(other, 1, "-")

    def __neg__(self) -> IndexExpr:
        return IndexExpr(self.shape, tuple(-c for c in self.coefs), -self.const)

    def __pos__(self) -> IndexExpr:
        return self

    def __mul__(self, other: Any) -> IndexExpr:
        if isinstance(other, IndexExpr):
            raise _non_affine("*")
        k = as_int(other, "*")
        return IndexExpr(self.shape, tuple(c * k for c in self.coefs), self.const * k)

    __rmul__ = __mul__

    def _non_affine_op(self, *_: Any) -> IndexExpr:
        raise _non_affine("//, / or %")

    __floordiv__ = __rfloordiv__ = __truediv__ = __rtruediv__ = _non_affine_op
    __mod__ = __rmod__ = __pow__ = _non_affine_op

    # ------------------------------------------------------------ shape manipulation
    def __getitem__(self, key: Any) -> IndexExpr:
        """`[:, None]` / `[None, :]`: place the index on an axis of a higher-rank shape."""
        key = key if isinstance(key, tuple) else (key,)
        shape, coefs, src = [], [], 0
        for k in key:
            if k is None:
                shape.append(1)
                coefs.append(0)
            elif isinstance(k, slice) and k == slice(None):
                if src >= self.ndim:
                    raise ConstraintError(
                        f"index expression of rank {self.ndim}: too many ':' in {key!r}"
                    )
                shape.append(self.shape[src])
                coefs.append(self.coefs[src])
                src += 1
            else:
                raise ConstraintError(
                    f"index expressions take only ':' and None subscripts "
                    f"(e.g. nl.arange(n)[:, None]), got {k!r}"
                )
        if src != self.ndim:
            raise ConstraintError(
                f"index expression of rank {self.ndim}: subscript {key!r} must use every axis once"
            )
        return IndexExpr(tuple(shape), tuple(coefs), self.const)

    def __setitem__(self, key: Any, value: Any) -> None:
        raise b1_error(
            ConstraintError,
            "err_cannot_assign_to_index",
            "'index' tensor does not support item assignment (materialize it with nisa.iota first)",
        )

    def __bool__(self) -> bool:
        raise _control_flow()

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 1

    def __iter__(self) -> Iterator[Any]:
        raise _control_flow()

    def __index__(self) -> int:
        raise _control_flow()

    # ------------------------------------------------------------ comparisons -> masks
    def _cmp(self, other: Any, op: str) -> Predicate:
        if isinstance(other, IndexExpr):
            return Predicate(((self - other, op),))
        return Predicate(((self - as_int(other, op), op),))

    def __lt__(self, other: Any) -> Predicate:
        return self._cmp(other, "<")

    def __le__(self, other: Any) -> Predicate:
        return self._cmp(other, "<=")

    def __gt__(self, other: Any) -> Predicate:
        return self._cmp(other, ">")

    def __ge__(self, other: Any) -> Predicate:
        return self._cmp(other, ">=")

    def __eq__(self, other: Any) -> Predicate:  # type: ignore[override]
        return self._cmp(other, "==")

    def __ne__(self, other: Any) -> Predicate:  # type: ignore[override]
        raise b1_error(
            ConstraintError,
            "err_mask_not_equal_not_supported",
            "'not equal' is not supported in mask predicates (split the region "
            "into two instructions)",
        )

    # ------------------------------------------------------------ evaluation
    def aligned(self, rank: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(shape, coefs) right-aligned to `rank` axes."""
        if self.ndim > rank:
            raise ConstraintError(
                f"index expression of rank {self.ndim} used in a {rank}-D iteration space"
            )
        return (1,) * (rank - self.ndim) + self.shape, _pad(self.coefs, rank)

    def values(self, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """The expression's values as an int64 array of `shape` (default: its own shape)."""
        shape = self.shape if shape is None else tuple(shape)
        _, coefs = self.aligned(len(shape))
        out = np.full(shape, self.const, dtype=np.int64)
        for k, c in enumerate(coefs):
            if c:
                view = [1] * len(shape)
                view[k] = shape[k]
                out = out + c * np.arange(shape[k], dtype=np.int64).reshape(view)
        return out

    def bounds(self, box: Sequence[tuple[int, int]]) -> tuple[int, int]:
        """(min, max) over the box (one (lo, hi) half-open interval per aligned axis)."""
        _, coefs = self.aligned(len(box))
        lo = hi = self.const
        for c, (a, b) in zip(coefs, box, strict=True):
            if b <= a:
                continue
            lo += min(c * a, c * (b - 1))
            hi += max(c * a, c * (b - 1))
        return lo, hi


def _non_affine(op: str) -> ConstraintError:
    return b1_error(
        ConstraintError,
        "err_unsupported_expression_in_mask",
        f"index expressions must stay affine (const + c0*i0 + c1*i1 ...); "
        f"operator {op} is not supported on nl.arange/nl.mgrid values",
    )


def _control_flow() -> ConstraintError:
    return b1_error(
        ConstraintError,
        "err_control_flow_condition_depending_on_arange",
        "control flow depending on `nl.arange` or `nl.mgrid` is not supported "
        "(use mask= to restrict an instruction)",
    )


# ---------------------------------------------------------------- predicates (masks)


class Predicate:
    """A conjunction of affine comparisons `expr <op> 0` (a B1 mask)."""

    __slots__ = ("terms",)

    def __init__(self, terms: tuple[tuple[IndexExpr, str], ...]):
        self.terms = tuple(terms)

    def __repr__(self) -> str:
        return " & ".join(f"({e!r} {op} 0)" for e, op in self.terms) or "True"

    @property
    def shape(self) -> tuple[int, ...]:
        return broadcast_shapes(*(e.shape for e, _ in self.terms))

    def __and__(self, other: Any) -> Predicate | bool:
        if isinstance(other, Predicate):
            return Predicate(self.terms + other.terms)
        if isinstance(other, (bool, np.bool_)):
            return self if other else False
        raise unsupported_mask(other)

    __rand__ = __and__

    def __or__(self, other: Any) -> Predicate:
        raise b1_error(
            ConstraintError,
            "err_logic_or_not_supported",
            "'logical or' is not supported in masks (masks are conjunctions joined with &)",
        )

    __ror__ = __or__

    def __invert__(self) -> Predicate:
        if len(self.terms) != 1 or _NEGATE[self.terms[0][1]] is None:
            raise b1_error(
                ConstraintError,
                "err_unsupported_expression_in_mask",
                "~ applies only to a single <, <=, > or >= comparison",
            )
        e, op = self.terms[0]
        return Predicate(((e, _NEGATE[op]),))

    def __bool__(self) -> bool:
        """A mask's truth value. In a condition (`if`, `elif`, `while`, `assert`, a conditional
        expression) it is control flow on nl.arange, an error (B1 errors catalogue). Elsewhere
        Python asked for it through `and`, `or` or `not` between masks: a mask is truthy there,
        as in AWS's simulator (its own nc_match_replace8 example passes `mask=(a and b)`), so
        `a and b` is b and `a or b` is a; a SimulationWarning says so."""
        loc = capture_location()
        code = loc.code.strip() if loc is not None and loc.code else ""
        if not code or code.startswith(_CONDITIONS) or " if " in code:
            raise b1_error(
                ConstraintError,
                "err_control_flow_condition_depending_on_arange",
                "control flow depending on `nl.arange` or `nl.mgrid` is not supported: "
                "a mask has no truth value at trace time (join mask comparisons with & "
                "instead of `and`, and pass them as mask=)",
            )
        message = (
            "Python `and`/`or`/`not` asked a mask for its truth value: a mask is truthy (as in "
            "AWS's simulator), so `a and b` keeps only b and `a or b` only a; join mask "
            "comparisons with & (NKI: use & instead of and)"
        )
        warnings.warn_explicit(message, SimulationWarning, loc.filename, loc.lineno)
        return True

    def evaluate(self, shape: tuple[int, ...], offset: Sequence[int] | None = None) -> np.ndarray:
        """Boolean array over `shape` (iteration indices shifted by `offset`)."""
        offset = tuple(offset or (0,) * len(shape))
        out = np.ones(shape, dtype=bool)
        for e, op in self.terms:
            _, coefs = e.aligned(len(shape))
            shifted = IndexExpr(
                shape, coefs, e.const + sum(c * o for c, o in zip(coefs, offset, strict=True))
            )
            out &= _CMP[op](shifted.values(shape), 0)
        return out

    def box(
        self, domain: tuple[int, ...]
    ) -> tuple[list[tuple[int, int]], list[tuple[IndexExpr, str]]]:
        """Per-axis intervals [lo, hi) of the single-axis terms, and the multi-axis residuals."""
        box = [(0, n) for n in domain]
        residual = []
        for e, op in self.terms:
            _, coefs = e.aligned(len(domain))
            axes = [k for k, c in enumerate(coefs) if c]
            if not axes:
                if not _CMP[op](e.const, 0):
                    return [(0, 0) for _ in domain], []
                continue
            if len(axes) > 1:
                residual.append((e, op))
                continue
            k = axes[0]
            lo, hi = _interval(coefs[k], e.const, op)
            box[k] = (max(box[k][0], lo), min(box[k][1], hi))
        box = [(lo, max(lo, hi)) for lo, hi in box]
        return box, residual


def _interval(c: int, const: int, op: str) -> tuple[float, float]:
    """Integer interval [lo, hi) of i satisfying c*i + const <op> 0 (c != 0)."""
    if c < 0:
        c, const = -c, -const
        op = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}[op]
    bound = -const / c
    if op == "<":
        return -math.inf, math.ceil(bound)
    if op == "<=":
        return -math.inf, math.floor(bound) + 1
    if op == ">":
        return math.floor(bound) + 1, math.inf
    if op == ">=":
        return math.ceil(bound), math.inf
    if (-const) % c:
        return 0, 0
    return -const // c, -const // c + 1


def unsupported_mask(x: Any) -> ConstraintError:
    return b1_error(
        ConstraintError,
        "err_unsupported_expression_in_mask",
        f"mask= must be an affine comparison of nl.arange/nl.mgrid/loop/program_id "
        f"values joined with &, got {type(x).__name__} {x!r}",
    )


def input_space_mask(mask: Any, in_shape: tuple[int, ...], perm: tuple[int, ...]) -> Any:
    """A transpose's mask, written over its input tile's axes (as B1 documents masks: ranges
    "along one of the input tile axes"), moved onto the result's axes (result axis j is input
    axis perm[j]). A mask whose indices do not fit the input's extents is returned as is."""
    m = as_mask(mask)
    if not isinstance(m, Predicate):
        return m
    rank = len(in_shape)
    terms = []
    for e, op in m.terms:
        if e.ndim > rank:
            return m
        shape, coefs = e.aligned(rank)
        pairs = enumerate(zip(shape, coefs, strict=True))
        if any(c and n not in (1, in_shape[k]) for k, (n, c) in pairs):
            return m
        terms.append(
            (IndexExpr(tuple(shape[a] for a in perm), tuple(coefs[a] for a in perm), e.const), op)
        )
    return Predicate(tuple(terms))


def as_mask(mask: Any) -> Predicate | bool | None:
    """Normalize a mask= argument: None (no mask), False (nothing runs) or a Predicate."""
    if mask is None:
        return None
    if isinstance(mask, (bool, np.bool_)):
        return None if mask else False
    if isinstance(mask, Predicate):
        return mask
    raise unsupported_mask(mask)
