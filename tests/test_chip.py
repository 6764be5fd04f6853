"""Chip descriptions: built-in YAML validates, every number has a source, overrides work."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trnsim.chip import KINDS, builtin_path, chips, format_chips_table, load_chip, sources
from trnsim.errors import SpecError

TINY = Path(__file__).parent / "data" / "tiny_chip.yaml"


def _leaves(node, prefix=""):
    for k, v in node.items():
        path = f"{prefix}{k}"
        if isinstance(v, dict) and "value" in v:
            yield path, v
        elif isinstance(v, dict):
            yield from _leaves(v, path + ".")
        elif k not in ("name", "description", "base"):
            yield path, v


@pytest.mark.parametrize("name", chips())
def test_builtin_chip_validates(name):
    chip = load_chip(name)
    assert chip.name == name
    assert chip.engines["tensor"].clock_ghz > 0
    assert set(chip.engines) == {"tensor", "vector", "scalar", "gpsimd", "sync"}


@pytest.mark.parametrize("name", chips())
def test_every_number_has_a_known_source(name):
    known = sources()
    raw = yaml.safe_load(builtin_path(name).read_text())
    leaves = list(_leaves(raw))
    assert len(leaves) > 80
    for path, leaf in leaves:
        assert isinstance(leaf, dict), f"{name}.yaml: {path} has no source"
        assert leaf.get("source") in known, f"{name}.yaml: {path}: source {leaf.get('source')}"
        # every kind but what-if (fitted: benchmarks/calibrate.py, issue 16)
        assert leaf.get("kind") in KINDS[:5], f"{name}.yaml: {path}: kind {leaf.get('kind')}"
    chip = load_chip(name)
    for path, _ in leaves:
        assert chip.source_of(path)[0] in known


def test_trn3_headline_numbers():
    trn3 = load_chip("trn3")
    assert trn3.hbm.capacity_bytes == 144 * 2**30
    assert trn3.cores_per_chip == 8
    assert trn3.nc_version == 4
    # nl.tile_size.gemm_moving_fmax is 512 on every chip (AWS's trn3 MX tutorial and
    # nki-library size PSUM tiles by it); NC-v4's nc_matmul takes 4096 (8 banks of fp32)
    assert trn3.tile_size["gemm_moving_fmax"] == 512
    assert trn3.tensor.moving_fmax == 4096
    assert trn3.peak_tflops("mxfp8") == pytest.approx(314.6, abs=0.1)


def test_trn2_accessors():
    c = load_chip("trn2")
    assert (c.sbuf.partitions, c.sbuf.bytes_per_partition) == (128, 224 * 1024)
    assert c.sbuf.usable_bytes_per_partition <= c.sbuf.bytes_per_partition
    assert (c.psum.banks, c.psum.bank_bytes, c.psum.bytes_per_partition) == (8, 2048, 16384)
    assert c.hbm.bandwidth_gbps == pytest.approx(2900)
    assert (c.dma.engines_per_core, c.dma.queues_per_engine) == (16, 16)
    assert c.dma.trigger_latency_ns == pytest.approx(1300)
    assert (c.lnc_default, c.lnc_allowed) == (2, (1, 2))
    assert c.peak_tflops("bfloat16") == pytest.approx(78.64, abs=0.01)
    assert c.peak_tflops("bf16", per="chip") == pytest.approx(8 * 78.6432)
    assert c.peak_tflops("float8_e4m3") == pytest.approx(2 * 78.6432)
    assert c.source_of("sbuf.bytes_per_partition") == ("NC-V3", "documented")
    assert c.source_of("sbuf.usable_bytes_per_partition") == ("KLR", "third-party")
    for key in ("pmax", "psum_bank_fmax", "gemm_stationary_fmax", "total_available_sbuf_size"):
        assert key in c.tile_size


def test_chip_is_frozen_and_cached():
    c = load_chip("trn2")
    with pytest.raises(AttributeError):
        c.nc_version = 9
    with pytest.raises(TypeError):
        c.tile_size["pmax"] = 64
    assert load_chip("trn2") is c
    assert load_chip("gen3") is c


def test_overrides_and_what_if_file(tmp_path):
    c = load_chip("trn2", hbm__bandwidth_gbps=4000, **{"dma.engines_per_core": 8})
    assert c.hbm.bandwidth_gbps == 4000
    assert c.dma.engines_per_core == 8
    assert c.source_of("hbm.bandwidth_gbps") == ("override", "what-if")
    f = tmp_path / "wide.yaml"
    f.write_text(
        "base: trn2\nname: wide\ndescription: trn2 with more SBUF\n"
        "sbuf:\n  bytes_per_partition: "
        "{value: 512, unit: KiB, source: me, kind: what-if}\n"
    )
    w = load_chip(f)
    assert w.name == "wide"
    assert w.sbuf.bytes_per_partition == 512 * 1024
    assert w.hbm.capacity_bytes == 96 * 2**30


def test_tiny_chip_loads():
    t = load_chip(TINY)
    assert t.name == "tiny"
    assert all(e.clock_ghz == 1 for e in t.engines.values())


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("sbuf:\n  partitions: 128\n", r"bad.yaml: sbuf.partitions: expected \{value"),
        ("sbuf:\n  partitions: {value: 128, kind: documented}\n", r"sbuf.partitions.source"),
        ("sbuf:\n  partitions: {value: 128, source: X, kind: guess}\n", r"sbuf.partitions.kind"),
        (
            "sbuf:\n  partitions: {value: many, source: X, kind: estimate}\n",
            r"sbuf.partitions: expected int",
        ),
        (
            "hbm:\n  bandwidth_gbps: {value: 3, unit: GHz, source: X, kind: estimate}\n",
            r"hbm.bandwidth_gbps.unit: 'GHz' does not fit",
        ),
        ("sbuf:\n  colour: {value: 1, source: X, kind: estimate}\n", r"sbuf.colour: unknown key"),
        ("psum:\n  banks: {value: 7, source: X, kind: estimate}\n", r"psum.banks: 7 banks"),
    ],
)
def test_malformed_file_names_file_and_key(tmp_path, text, match):
    f = tmp_path / "bad.yaml"
    f.write_text("base: trn2\nname: bad\ndescription: broken\n" + text)
    with pytest.raises(SpecError, match=match):
        load_chip(f)


def test_unknown_chip_and_override():
    with pytest.raises(SpecError, match="known: trn1, trn2, trn3"):
        load_chip("trn9")
    with pytest.raises(SpecError, match="no key 'bandwidth'"):
        load_chip("trn2", hbm__bandwidth=1)


def test_chips_table():
    text = format_chips_table()
    for needle in ("trn1", "trn2", "trn3", "144 GiB", "4.9 TB/s", "78.6"):
        assert needle in text
