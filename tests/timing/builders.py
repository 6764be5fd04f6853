"""Hand-made program records for timing tests: operands (`tile`) and a ProgramBuilder."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from trnsim.program import Instruction, Operand, Region

TINY = Path(__file__).parents[1] / "data" / "tiny_chip.yaml"
ITEMSIZE = {"bfloat16": 2, "float16": 2, "float32": 4, "float8_e4m3": 1, "int32": 4, "uint8": 1}


def tile(
    space: str,
    shape: tuple[int, ...],
    dtype: str = "bfloat16",
    offset: int = 0,
    core: int = 0,
    name: str = "t",
    partition: int = 0,
    stride: int = 1,
    tensor: str = "",
) -> Operand:
    """An operand: on-chip tiles are [partitions, free...] at byte `offset` of each partition;
    HBM tensors are contiguous at byte `offset`. `stride` (elements) spaces the innermost dim."""
    isz = ITEMSIZE[dtype]
    if space == "hbm":
        n = math.prod(shape)
        region = Region("hbm", core, 0, 1, offset, offset + n * isz)
        return Operand(name, region, dtype, shape, 1, n, n * isz, isz, n * isz, tensor or name)
    parts, free = shape[0], math.prod(shape[1:])
    span = ((free - 1) * stride + 1) * isz
    region = Region(space, core, partition, parts, offset, offset + span)
    contiguous = free * isz if stride == 1 else isz
    return Operand(
        name,
        region,
        dtype,
        shape,
        parts,
        free,
        parts * free * isz,
        stride * isz,
        contiguous,
        tensor or name,
    )


class ProgramBuilder:
    """Appends Instructions in program order: b.add("tensor_copy", "vector", reads, writes)."""

    def __init__(self) -> None:
        self.program: list[Instruction] = []

    def add(self, opcode: str, engine: str, reads=(), writes=(), core: int = 0, **attrs) -> int:
        i = len(self.program)
        self.program.append(
            Instruction(i, opcode, engine, core, tuple(reads), tuple(writes), dict(attrs))
        )
        return i

    def matmul(self, dst: Operand, stationary: Operand, moving: Operand, **attrs) -> int:
        reads = (renamed(stationary, "stationary"), renamed(moving, "moving"))
        return self.add("nc_matmul", "tensor", reads, (renamed(dst, "dst"),), **attrs)

    def dma(self, dst: Operand, src: Operand, core: int = 0, **attrs) -> int:
        return self.add(
            "dma_copy", "dma", (renamed(src, "src"),), (renamed(dst, "dst"),), core=core, **attrs
        )


def renamed(op: Operand, name: str) -> Operand:
    """The same operand under another parameter name."""
    return replace(op, name=name)
