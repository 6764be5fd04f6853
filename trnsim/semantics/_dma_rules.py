"""Rules of the DMA instructions that the YAML limit vocabulary cannot say (nki-api.md §7.5).

Each check raises ConstraintError("<instr>: <what>; <allowed>"); `_issue` adds the user's line.
"""

from __future__ import annotations

from typing import Any

from trnsim.memory import View
from trnsim.semantics import _ops
from trnsim.spec import fail

OOB_MODES = ("error", "skip")
DGE_MODES = ("unknown", "swdge", "hwdge", "none")
HWDGE_QUEUE_ENGINES = ("sync", "scalar")
MAX_PRIORITY = 3  # DMA QoS levels 0..3 (NC-v4, 0.5.0)
MAX_COMPUTE_SOURCES = 16
TRANSPOSE_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


def mode_name(x: Any, what: str, instr: str = "dma") -> str:
    """'error'/'skip' or a dge mode name from an nisa enum member (or its name)."""
    name = getattr(x, "name", x)
    allowed = OOB_MODES if what == "oob_mode" else DGE_MODES
    if isinstance(name, str) and name in allowed:
        return name
    fail(
        instr,
        f"{what}={x!r} is not a nisa.{what} member",
        f"allowed: {', '.join(f'nisa.{what}.{a}' for a in allowed)}",
    )
    return ""  # unreachable: fail raises


def _dyn_kind(v: Any) -> str | None:
    dyn = getattr(v, "dynamic", None)
    return None if dyn is None else dyn.kind


def _check_dynamic_kinds(instr: str, operands: dict[str, Any]) -> dict[str, str]:
    kinds = {}
    for name, v in operands.items():
        k = _dyn_kind(v)
        if k == "indirect":
            fail(
                instr,
                f"operand '{name}' uses tensor indirection (.indirect()), which only "
                "compute engines take",
                "DMA takes dynamic offsets from .ap(scalar_offset=...) or .ap(vector_offset=...)",
            )
        if k is not None:
            kinds[name] = k
    return kinds


def _check_priority(instr: str, chip: Any, priority: Any) -> None:
    if priority is None:
        return
    if (
        not isinstance(priority, int)
        or isinstance(priority, bool)
        or not 0 <= priority <= MAX_PRIORITY
    ):
        fail(instr, f"priority={priority!r}", f"allowed: an int in [0, {MAX_PRIORITY}] or None")
    if chip.nc_version < 4:
        fail(
            instr,
            f"priority={priority} on {chip.name} (NeuronCore-v{chip.nc_version})",
            "DMA priority exists on NeuronCore-v4 (trn3) only; pass priority=None",
        )


def _check_oob(instr: str, oob: str, kinds: dict[str, str]) -> None:
    if oob == "skip" and not kinds:
        fail(
            instr,
            "oob_mode=skip on a transfer with no dynamic index",
            "skip applies only to dynamic addressing (.ap(scalar_offset=/vector_offset=)); "
            "use oob_mode.error",
        )


def _check_hwdge(instr: str, chip: Any) -> None:
    if chip.nc_version < 3:
        fail(
            instr,
            f"dge_mode=hwdge on {chip.name} (NeuronCore-v{chip.nc_version})",
            "hardware DGE exists on NeuronCore-v3 (trn2) or newer",
        )


def check_dma_copy(*, chip: Any, engine: str, attrs: Any, dst: View, src: View) -> None:
    instr = "dma_copy"
    if dst.size != src.size:
        fail(
            instr,
            f"dst has {dst.size} elements {list(dst.shape)} but src has {src.size} "
            f"{list(src.shape)}",
            "element counts must match (shapes may differ)",
        )
    oob = mode_name(attrs.get("oob_mode", "error"), "oob_mode", instr)
    dge = mode_name(attrs.get("dge_mode", "unknown"), "dge_mode", instr)
    kinds = _check_dynamic_kinds(instr, {"dst": dst, "src": src})
    if src.dtype != dst.dtype and (src.dtype.kind == "packed" or dst.dtype.kind == "packed"):
        fail(
            instr,
            f"src {src.dtype.name} -> dst {dst.dtype.name} needs a cast",
            "packed MX (x4) dtypes are copied as is: use equal dtypes (or .view())",
        )
    if dge == "hwdge":
        _check_hwdge(instr, chip)
        if src.dtype != dst.dtype:
            fail(
                instr,
                f"dge_mode=hwdge with src {src.dtype.name} and dst {dst.dtype.name}",
                "hardware DGE does not cast: use equal dtypes (or .view()), or another dge_mode",
            )
        vec = [n for n, k in kinds.items() if k == "vector"]
        if vec:
            fail(
                instr,
                f"dge_mode=hwdge with a vector_offset on '{vec[0]}'",
                "gather/scatter needs dge_mode.swdge (or unknown)",
            )
    if dge == "none" and kinds:
        fail(
            instr,
            f"dge_mode=none with a dynamic address on '{next(iter(kinds))}'",
            "descriptors built ahead of time cannot follow runtime offsets: use swdge, "
            "hwdge or unknown",
        )
    queue = attrs.get("queue_engine")
    if queue is not None:
        if queue not in HWDGE_QUEUE_ENGINES:
            fail(
                instr,
                f"engine={queue!r}",
                "a DMA is triggered by nisa.engine.sync or nisa.engine.scalar (or unknown)",
            )
        if dge != "hwdge":
            fail(
                instr,
                f"engine={queue} with dge_mode={dge}",
                "engine= selects the hardware DGE trigger: it needs dge_mode=nisa.dge_mode.hwdge",
            )
    _check_oob(instr, oob, kinds)
    _check_priority(instr, chip, attrs.get("priority"))
    rmw = attrs.get("dst_rmw_op")
    if rmw is not None:
        name = _ops.op_name(rmw, "dst_rmw_op")
        if name != "add":
            fail(instr, f"dst_rmw_op={name}", "only np.add (nl.add) is supported")
        if oob != "error":
            fail(instr, "dst_rmw_op with oob_mode=skip", "a read-modify-write needs oob_mode.error")


def transpose_axes(ndim: int, axes: Any) -> tuple[int, ...]:
    """The permutation of a dma_transpose (the one allowed for the rank, or `axes`)."""
    if ndim not in TRANSPOSE_AXES:
        fail("dma_transpose", f"src has {ndim} dimensions", "2-, 3- or 4-D tensors")
    want = TRANSPOSE_AXES[ndim]
    if axes is not None and tuple(int(a) for a in axes) != want:
        fail(
            "dma_transpose",
            f"axes={tuple(axes)} for a {ndim}-D src",
            f"a {ndim}-D transpose uses axes={want} (supported: (1, 0), (2, 1, 0), (3, 1, 2, 0))",
        )
    return want


def check_dma_transpose(*, chip: Any, engine: str, attrs: Any, dst: View, src: View) -> None:
    instr = "dma_transpose"
    if chip.nc_version < 3:
        fail(
            instr,
            f"{chip.name} has NeuronCore-v{chip.nc_version}",
            "DMA transpose exists on NeuronCore-v3 (trn2) or newer",
        )
    if src.dtype.itemsize not in (2, 4) or src.dtype.kind == "packed":
        fail(
            instr,
            f"dtype {src.dtype.name} ({src.dtype.itemsize} bytes)",
            "2- or 4-byte dtypes (bfloat16, float16, float32, int16, int32, ...)",
        )
    perm = transpose_axes(src.ndim, attrs.get("axes"))
    want = tuple(src.shape[a] for a in perm)
    if dst.ndim != src.ndim or tuple(dst.shape) != want:
        fail(
            instr,
            f"dst has shape {list(dst.shape)} for src {list(src.shape)}",
            f"dst must be the transposed shape {list(want)}",
        )
    oob = mode_name(attrs.get("oob_mode", "error"), "oob_mode", instr)
    dge = mode_name(attrs.get("dge_mode", "unknown"), "dge_mode", instr)
    kinds = _check_dynamic_kinds(instr, {"dst": dst, "src": src})
    if "dst" in kinds:
        fail(instr, f"dst has a dynamic ({kinds['dst']}) address", "only src may be indirect")
    if kinds.get("src") == "vector":
        _check_indirect_transpose(src, dge)
    elif dge not in ("unknown", "hwdge", "none"):
        # none: descriptors built ahead of time, as for dma_copy with static addresses
        # (nki-library's mlp_tkg transposes its bias with dge_mode none)
        fail(instr, f"dge_mode={dge}",
             "a direct transpose takes dge_mode unknown, hwdge or none")
    if dge == "hwdge":
        _check_hwdge(instr, chip)
        _check_hwdge_transpose(src)
    _check_oob(instr, oob, kinds)
    _check_priority(instr, chip, attrs.get("priority"))


def _check_hwdge_transpose(src: View) -> None:
    # 2-D: the GA dma_transpose page; 3-D/4-D: 0.6.0 release notes (nki-api.md §7.5).
    instr, s = "dma_transpose", src.shape
    if src.dtype.itemsize != 2:
        fail(
            instr,
            f"dge_mode=hwdge with dtype {src.dtype.name}",
            "hardware DGE transposes 2-byte dtypes only",
        )
    if src.ndim == 2 and s[0] != 16:
        fail(
            instr,
            f"dge_mode=hwdge with src.shape[0]={s[0]}",
            "a 2-D hwdge transpose needs src.shape[0] == 16",
        )
    if src.ndim > 2 and (s[0] not in (1, 2, 4, 8, 16) or (s[0] * s[-2]) % 16):
        fail(
            instr,
            f"dge_mode=hwdge with src shape {list(s)}",
            "src.shape[0] in {1, 2, 4, 8, 16} and src.shape[0] * src.shape[-2] a multiple of 16",
        )
    if s[-1] % 128:
        fail(instr, f"dge_mode=hwdge with src.shape[-1]={s[-1]}", "a multiple of 128")


def _check_indirect_transpose(src: View, dge: str) -> None:
    instr, s = "dma_transpose", src.shape
    idx = src.dynamic.index
    if dge not in ("unknown", "swdge"):
        fail(
            instr,
            f"dge_mode={dge} with a vector_offset src",
            "an indirect (gather) transpose takes dge_mode unknown or swdge",
        )
    if src.dtype.itemsize != 2:
        fail(instr, f"indirect transpose of dtype {src.dtype.name}", "2-byte dtypes only")
    if s[-1] > 128:
        fail(instr, f"indirect transpose with src.shape[-1]={s[-1]}", "at most 128")
    if s[0] % 16:
        fail(instr, f"indirect transpose with src.shape[0]={s[0]}", "a multiple of 16")
    if src.ndim == 4 and s[1] != 1 and s[2] != 1:
        fail(
            instr,
            f"indirect transpose of a 4-D src {list(s)}",
            "src.shape[1] or src.shape[2] must be 1",
        )
    p = idx.shape[0]
    if idx.ndim != 2 or not 16 <= p <= 128 or p % 16:
        fail(
            instr,
            f"indices of shape {list(idx.shape)}",
            "2-D indices whose first dimension is a multiple of 16 in [16, 128]",
        )
    if idx.dtype.name != "uint32":
        fail(instr, f"indices of dtype {idx.dtype.name}", "uint32 indices")


def check_dma_compute(*, chip: Any, engine: str, attrs: Any, dst: View, **operands: Any) -> None:
    instr = "dma_compute"
    srcs = [(k, v) for k, v in operands.items() if v is not None]
    if not srcs:
        fail(instr, "srcs is empty", f"1 to {MAX_COMPUTE_SOURCES} source tensors")
    for k, v in srcs:
        if v.size != dst.size:
            fail(
                instr,
                f"{k} has {v.size} elements {list(v.shape)} but dst has {dst.size} "
                f"{list(dst.shape)}",
                "element counts must match",
            )
        if v.dtype.kind == "packed":
            fail(
                instr,
                f"{k} has packed dtype {v.dtype.name}",
                "dma_compute works in fp32 on unpacked dtypes",
            )
    if dst.dtype.kind == "packed":
        fail(instr, f"dst has packed dtype {dst.dtype.name}", "unpacked dtypes only")
    name = _ops.op_name(attrs.get("reduce_op"), "reduce_op")
    if name != "add":
        fail(instr, f"reduce_op={name}", "only nl.add")
    scales = attrs.get("scales")
    if scales is not None:
        scales = list(scales)
        if len(scales) != len(srcs):
            fail(instr, f"{len(scales)} scales for {len(srcs)} srcs", "one scale per source")
        if any(float(s) != 1.0 for s in scales):
            fail(instr, f"scales={scales}", "all scales must be 1.0")
    kinds = _check_dynamic_kinds(instr, {"dst": dst, **dict(srcs)})
    if "vector" in kinds.values() and len(srcs) != 2:
        fail(
            instr,
            f"a vector_offset form with {len(srcs)} sources",
            "the gather/scatter read-modify-write forms take exactly two sources",
        )
    oob = mode_name(attrs.get("oob_mode", "error"), "oob_mode", instr)
    _check_oob(instr, oob, kinds)
