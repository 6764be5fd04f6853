"""The op coverage table: docs/torch-ops.md is what `trnsim ops --markdown` generates, every
registry entry names a real ATen overload, and the kernel entries' families are exercised by
the OpInfo tests."""

from __future__ import annotations

from pathlib import Path

import torch
from trnsim.backend import coverage
from trnsim.backend.registry import coverage as entries

ROOT = Path(__file__).resolve().parents[2]


def test_docs_table_is_current():
    doc = (ROOT / "docs" / "torch-ops.md").read_text()
    assert doc.strip() == coverage.markdown().strip(), (
        "docs/torch-ops.md is stale: regenerate it with `trnsim ops --markdown > "
        "docs/torch-ops.md`")


def test_every_entry_is_a_real_overload():
    from trnsim.backend.dispatch import resolve

    for e in entries():
        assert resolve(e.qualified) is not None, e.qualified


def test_kernel_entries_name_their_kernels():
    import trnsim.kernels as lib

    for e in entries():
        if e.kernel is not None and e.kernels:
            for k in e.kernels:
                assert any(hasattr(__import__(f"trnsim.kernels.{m}", fromlist=["x"]), k)
                           for m in _modules(lib)), f"{e.name}: no kernel named {k}"


def _modules(lib) -> list[str]:
    import pkgutil

    return [m.name for m in pkgutil.iter_modules(lib.__path__) if not m.name.startswith("_")]


def test_the_training_workloads_need_no_missing_op():
    names = set(coverage.missing())
    for op in ("aten::mm", "aten::addmm", "aten::_softmax", "aten::native_layer_norm",
               "aten::embedding_dense_backward", "aten::nll_loss_forward"):
        assert op not in names
    assert torch.ops.aten.mm.default is not None


def test_the_devices_own_primitives_are_core_not_missing():
    own, gone = set(coverage.core()), set(coverage.missing())
    for op in ("aten::empty_strided", "aten::view", "aten::_local_scalar_dense",
               "aten::resize_", "aten::_pin_memory"):
        assert op in own and op not in gone
    assert not own & gone
    assert "aten::_foobar" in gone
