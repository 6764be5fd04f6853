"""Checked local shape annotations: `x: nt.tensor[P, F] = value` inside a kernel.

Python never evaluates annotations of local variables, but B1 checks them
(err_annotation_shape_mismatch). So a kernel whose body has annotated assignments is
recompiled once from its source with each `x: ann = value` turned into
`x = checked(value, ann, 'x')` (same file and line numbers, same globals). Kernels without
annotated assignments, closures, and functions whose source is unavailable run unchanged.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

_HELPER = "trnsim.compat.neuronxcc.nki._annotations"


def checked(value: Any, annotation: Any, name: str) -> Any:
    """value, after checking its shape against an nt.tensor[...] annotation."""
    check = getattr(annotation, "check", None)
    if callable(check) and hasattr(annotation, "matches"):
        return check(value, name)
    return value


class _Rewrite(ast.NodeTransformer):
    def __init__(self) -> None:
        self.count = 0

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        if self.count < 0:  # nested function definitions are left alone
            return node
        return self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        if node.value is None or not isinstance(node.target, ast.Name):
            return node
        self.count += 1
        helper = ast.Attribute(
            value=ast.Call(
                func=ast.Name("__import__", ast.Load()),
                args=[ast.Constant(_HELPER)],
                keywords=[ast.keyword("fromlist", ast.List([ast.Constant("x")], ast.Load()))],
            ),
            attr="checked",
            ctx=ast.Load(),
        )
        call = ast.Call(
            func=helper,
            args=[node.value, node.annotation, ast.Constant(node.target.id)],
            keywords=[],
        )
        new = ast.Assign(targets=[ast.Name(node.target.id, ast.Store())], value=call)
        return ast.copy_location(new, node)


def with_checked_annotations(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn recompiled so its annotated local assignments check their shapes (or fn itself)."""
    code = getattr(fn, "__code__", None)
    if code is None or code.co_freevars:
        return fn
    try:
        src = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(src)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return fn
    if not tree.body or not isinstance(tree.body[0], ast.FunctionDef):
        return fn
    fdef = tree.body[0]
    if not any(isinstance(n, ast.AnnAssign) and n.value is not None for n in ast.walk(fdef)):
        return fn
    fdef.decorator_list = []
    rewriter = _Rewrite()
    fdef.body = [rewriter.visit(stmt) for stmt in fdef.body]
    ast.fix_missing_locations(tree)
    ast.increment_lineno(tree, code.co_firstlineno - 1)
    namespace: dict[str, Any] = {}
    try:
        exec(compile(tree, code.co_filename, "exec"), fn.__globals__, namespace)
    except Exception:  # a source we cannot recompile faithfully: keep the original
        return fn
    new = namespace.get(fdef.name)
    if new is None:
        return fn
    new.__defaults__ = fn.__defaults__
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__doc__ = fn.__doc__
    return new
