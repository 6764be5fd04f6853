"""nki.compiler.frontend: trace a kernel for a target without computing its values.

AWS's frontends (`ParserFrontend`, the 0.1-0.6 parser; `TracerFrontend`, 0.7's tracer) turn a
kernel specialised on its inputs into the compiler's MLIR. trnsim's frontend is its tracer:
`compile` runs the kernel on the simulated chip of `target` with values off, so every NKI rule
is checked at the user's line and the result holds the traced program (trnsim's instruction
record, printed as a listing; it is not MLIR and cannot be compiled to a NEFF). nki-library's
trace-only tests (`@pytest.mark.trace_only`, test/utils/kernel_tracer.py) run through it.
"""

from __future__ import annotations

import ast
import inspect
import os
import sys
import textwrap
from dataclasses import dataclass, field
from typing import IO, Any

from trnsim.errors import ConstraintError
from trnsim.program import Instruction, Operand, capture_location

LISTING_FILE = "trnsim_program.txt"
PYTHON_AST_FILE = "python_ast.txt"


@dataclass
class ProgramListing:
    """The traced program as text (`module.operation.print(file=f)`, as an MLIR module prints)."""

    kernel_name: str
    target: str
    lnc: int
    program: list[Instruction] = field(default_factory=list)

    @property
    def operation(self) -> ProgramListing:
        return self

    def lines(self) -> list[str]:
        head = (f"// trnsim program of {self.kernel_name} on {self.target}, lnc={self.lnc}: "
                f"{len(self.program)} instructions (not MLIR)")
        return [head, *(_instruction_line(ins) for ins in self.program)]

    def print(self, file: IO[str] | None = None, **_print_options: Any) -> None:
        """Write the listing (MLIR's print options, e.g. enable_debug_info, do not apply)."""
        (file if file is not None else sys.stdout).write(str(self) + "\n")

    def __str__(self) -> str:
        return "\n".join(self.lines())


@dataclass
class FrontendResult:
    """What `NKIFrontend.compile` returns: the traced program and what it was traced for."""

    module: ProgramListing
    kernel_name: str
    target: str
    lnc: int
    output_names: list[str] | None
    outputs: Any  # the kernel's returned tensors (values not computed)

    @property
    def program(self) -> list[Instruction]:
        return self.module.program


class NKIFrontend:
    """Specialise a kernel on its inputs and trace it (trnsim: on the simulated chip)."""

    def compile(self, kernel: Any, inputs: dict[str, Any] | None = None, target: str | None = None,
                lnc: int = 1, artifacts_dir: str | os.PathLike | None = None,
                dump_python_ast: bool = False,
                output_names: list[str] | None = None) -> FrontendResult:
        """Trace `kernel(**inputs)` for `target` (trn1|trn2|trn3 or gen2|gen3|gen4) on `lnc`
        logical cores. Rule violations raise trnsim's errors at the kernel's line. With
        `artifacts_dir`, the listing is written there (and the kernel's Python AST with
        `dump_python_ast`)."""
        from trnsim.nki.jit import _as_kernel

        if inputs is not None and not isinstance(inputs, dict):
            raise ConstraintError(f"{type(self).__name__}.compile: inputs= is a dict of the "
                                  f"kernel's arguments by name, got {type(inputs).__name__}",
                                  capture_location())
        k = _as_kernel(kernel)
        name = getattr(k.fn, "__name__", "kernel")
        run = k[int(lnc)].launch((), dict(inputs or {}), chip=target, values=False)
        listing = ProgramListing(name, run.chip.name, int(lnc), run.program)
        if artifacts_dir is not None:
            os.makedirs(artifacts_dir, exist_ok=True)
            with open(os.path.join(artifacts_dir, LISTING_FILE), "w") as f:
                listing.print(file=f)
            if dump_python_ast:
                with open(os.path.join(artifacts_dir, PYTHON_AST_FILE), "w") as f:
                    f.write(_python_ast(k.fn) + "\n")
        return FrontendResult(listing, name, run.chip.name, int(lnc),
                              list(output_names) if output_names is not None else None,
                              run.outputs)


class ParserFrontend(NKIFrontend):
    """The 0.1-0.6 parser frontend's entry point; trnsim traces by running Python (never
    stricter than the parser: what it accepts runs here)."""


class TracerFrontend(NKIFrontend):
    """The 0.7 tracer frontend's entry point: the kernel's Python runs (trnsim's own way)."""


def _instruction_line(ins: Instruction) -> str:
    reads = ", ".join(_operand(op) for op in ins.reads)
    writes = ", ".join(_operand(op) for op in ins.writes)
    at = f"  // {ins.loc.short()}" if ins.loc is not None else ""
    return f"%{ins.index} = {ins.engine}.{ins.opcode}({reads}) -> ({writes}) core {ins.core}{at}"


def _operand(op: Operand) -> str:
    shape = "x".join(map(str, op.shape))
    return f"{op.tensor_name or op.name}:{op.region.space}[{shape}]{op.dtype}"


def _python_ast(fn: Any) -> str:
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return f"// source of {getattr(fn, '__name__', fn)!r} is not available"
    return ast.dump(ast.parse(source), indent=1)
