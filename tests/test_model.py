"""The canonical model: JSON shape (schema), value rules, round trip through JSON."""
from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from nczarr_conformance.model import Attribute, Dataset, diff, values_to_json
from nczarr_conformance.resources import model_schema
from tests.conftest import REPO

SCHEMA = json.loads(model_schema().read_text(encoding="utf-8"))


def test_packaged_schema_is_the_documented_contract():
    documented = REPO / "docs" / "contracts" / "model.schema.json"
    assert json.loads(documented.read_text(encoding="utf-8")) == SCHEMA


def test_small_model_is_schema_valid(small):
    jsonschema.validate(small.to_json(), SCHEMA)
    jsonschema.validate(small.to_json(data=False, storage=True), SCHEMA)


def test_json_round_trip_is_identity(small):
    again = Dataset.from_json(json.loads(small.canonical_text()))
    assert diff(small, again) == []
    assert again.canonical_text() == small.canonical_text()


def test_float_values_are_shortest_at_own_precision():
    assert values_to_json(np.array([0.1], "f4"), "float") == [0.1]
    assert values_to_json(np.array([0.1], "f8"), "double") == [0.1]
    assert values_to_json(np.array([np.nan, np.inf, -np.inf], "f8"), "double") == ["NaN", "Infinity", "-Infinity"]


def test_negative_zero_differs_in_canonical_text(small):
    other = Dataset.from_json(json.loads(small.canonical_text()))
    other.root.variables["sc"].data = np.array(-0.0)
    small.root.variables["sc"].data = np.array(0.0)
    assert small.canonical_text() != other.canonical_text()


def test_integers_exact_including_uint64_max():
    assert values_to_json(np.array([2**64 - 1], "u8"), "uint64") == [18446744073709551615]


def test_char_elements_are_latin1_and_nul():
    assert values_to_json(np.array([b"\xe9", b"\x00", b"a"], "S1"), "char") == ["é", "\u0000", "a"]


def test_attribute_must_be_a_vector():
    try:
        Attribute("int", np.array([], dtype="i4"))
    except ValueError:
        return
    raise AssertionError("empty numeric attribute accepted")


def _stored_differently(small):
    other = Dataset.from_json(json.loads(small.canonical_text()))
    var = other.root.variables["v"]
    var.filters = [{"id": "zlib", "level": 1}]
    var.endianness = "big"
    var.chunks = [2, 3]
    var.no_fill = True
    var.order = "F"
    var.dimension_separator = "/"
    return other


def test_diff_compares_storage_by_default(small):
    found = diff(small, _stored_differently(small))
    assert {line.split(":")[0].split("/variables/v/")[1].split("[")[0] for line in found} == {
        "chunks", "dimension_separator", "endianness", "filters", "no_fill", "order"}


def test_unstated_storage_defaults_equal_the_same_values_stated(small):
    stated = Dataset.from_json(json.loads(small.canonical_text()))
    for var in stated.root.variables.values():
        var.filters, var.order, var.dimension_separator = [], "C", "."
    stated.root.variables["v"].endianness = "little"
    assert diff(small, stated) == []


def test_diff_ignores_only_the_named_storage_fields_and_only_with_a_reason(small):
    other = _stored_differently(small)
    ignore = {f: "test" for f in ("filters", "endianness", "no_fill", "order", "dimension_separator")}
    assert diff(small, other, ignore=ignore) == ['/root/variables/v/chunks[0]: 1 != 2',
                                                 '/root/variables/v/chunks[1]: 2 != 3']
    assert diff(small, other, ignore={**ignore, "contiguous": "test"}) != []  # v is chunked on both sides
    other.root.variables["v"].chunks = None
    assert diff(small, other, ignore={**ignore, "contiguous": "test"}) == []
    with pytest.raises(ValueError, match="needs a reason"):
        diff(small, other, ignore={"chunks": " "})
    with pytest.raises(ValueError, match="cannot ignore"):
        diff(small, other, ignore={"attributes": "no"})
