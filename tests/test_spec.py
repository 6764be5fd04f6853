"""Instruction records under isa/instructions: each valid, each with semantics, none orphaned."""

from __future__ import annotations

import pytest

from trnsim import semantics
from trnsim.errors import SpecError
from trnsim.spec import _parse_record, engine_access, instruction_specs


def test_every_record_has_semantics_and_every_semantics_a_record():
    specs = instruction_specs()
    registered = set(semantics.registered())
    assert not sorted(set(specs) - registered), "records without semantics"
    assert not sorted(registered - set(specs)), "semantics without records"


def test_every_record_names_a_source_and_known_engines():
    access = engine_access()
    for name, spec in instruction_specs().items():
        assert spec.source, f"{name}: no source"
        for e in spec.engines:
            assert e in access, f"{name}: engine {e} missing from isa/engines.yaml"
        if spec.check:
            assert spec.check_fn() is not None


def test_bad_record_names_file_and_key_path():
    msg = r"elementwise.yaml: foo.engines: 'vectorr' is not an engine"
    with pytest.raises(SpecError, match=msg):
        _parse_record("elementwise", "foo", {"engines": ["vectorr"], "operands": {}})
    with pytest.raises(SpecError, match=r"foo.limits.max_parts: not a limit"):
        _parse_record("elementwise", "foo", {"engines": ["vector"], "limits": {"max_parts": 1}})
    with pytest.raises(SpecError, match=r"foo: unknown keys \['enignes'\]"):
        _parse_record("elementwise", "foo", {"enignes": ["vector"], "engines": ["vector"]})
