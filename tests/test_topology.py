"""Topologies: the built-in files validate, every number names a source, what-ifs load,
placement and routing follow the fabric."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trnsim.chip import KINDS, sources
from trnsim.errors import SpecError
from trnsim.topology import builtin_path, format_topologies_table, load_topology, topologies

TINY = Path(__file__).parent / "data" / "tiny_topology.yaml"


def _leaves(node, prefix=""):
    for k, v in node.items():
        path = f"{prefix}{k}"
        if isinstance(v, dict) and "value" in v:
            yield path, v
        elif isinstance(v, dict):
            yield from _leaves(v, path + ".")


@pytest.mark.parametrize("name", topologies())
def test_builtin_topologies_validate_with_sources(name):
    t = load_topology(name)
    known = sources()
    raw = yaml.safe_load(builtin_path(name).read_text())
    for path, leaf in _leaves(raw):
        assert leaf.get("source") in known, f"{name}: {path}: {leaf.get('source')}"
        assert leaf.get("kind") in KINDS[:4], f"{name}: {path}: {leaf.get('kind')}"
    assert t.chips == 1 or t.levels
    assert t.source_of("chips")[0] in known


def test_headline_shapes():
    assert load_topology("trn2-instance").max_ranks(2) == 64  # 16 chips x 4 logical cores
    us = load_topology("trn2-ultraserver")
    assert us.chips == 64 and [lv.fabric for lv in us.levels] == ["torus", "ring"]
    g2 = load_topology("trn3-ultraserver-gen2")
    assert g2.chips == 144 and g2.max_ranks(2) == 576
    assert g2.levels[1].bandwidth_gbps == pytest.approx(448)  # 7 x8 ports each way


def test_placement_and_routing():
    t = load_topology("trn2-ultraserver")
    assert t.place(5, 2).chip == 1 and t.place(5, 2).cores == (2, 3)  # an LNC=2 core pair
    assert t.hops(0, 5) == (2, 0)  # (0,0) -> (1,1) on the 4x4 torus
    assert t.hops(0, 3) == (1, 0)  # wrap-around link
    assert t.hops(0, 16) == (0, 1)  # the same coordinate one instance over
    assert t.hops(0, 37) == (2, 2)
    g2 = load_topology("trn3-ultraserver-gen2")
    assert g2.hops(0, 1) == (1, 0) and g2.hops(0, 5) == (0, 1)  # one switch level or the other


def test_what_if_topologies(tmp_path):
    t = load_topology("trn2-instance", levels__instance__link_gbps=64)
    assert t.levels[0].link_gbps == 64 and t.source_of("levels.instance.link_gbps")[1] == "what-if"
    f = tmp_path / "half.yaml"
    f.write_text("base: trn2-instance\nname: half\ndescription: slower links\n"
                 "levels:\n  instance:\n    link_gbps: {value: 64, unit: GB/s, source: x, "
                 "kind: what-if}\n")
    assert load_topology(f).levels[0].bandwidth_gbps == 256
    assert load_topology(TINY).chip.name == "tiny_linked"


@pytest.mark.parametrize(("override", "match"), [
    ({"chips": 17}, r"chips: 17 chips, but the levels join 16 = 16"),
    ({"levels__instance__fabric": "hypercube"}, r"'hypercube' is not a fabric"),
    ({"levels__instance__link_gbps": 10_000}, r"more than trn2's interconnect.bandwidth_gbps"),
    ({"levels__instance__shape": [4, 5]}, r"holds 20 units, not units=16"),
])
def test_bad_topologies_name_the_key(override, match):
    with pytest.raises(SpecError, match=match):
        load_topology("trn2-instance", **override)


def test_table_lists_every_topology():
    text = format_topologies_table()
    assert all(n in text for n in topologies())
