"""The Zarr v3 spec rules (conformance/rules_v3.py) judge what a writer wrote and what a reader read.

Each rule is run on stores planted here: one that keeps the rule (it follows) and, for each way the
rule names, one that breaks it (it deviates, and the evidence names the object and the fault). The
matrix run's own results are in reports/rules.* (tests/conformance/test_report.py holds them current).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nczarr_conformance.conformance import rules_v3
from nczarr_conformance.conformance.matrix import MatrixRun
from nczarr_conformance.conformance.rules import SPEC_RULES, RuleContext
from nczarr_conformance.model import Dataset, Group, Variable
from nczarr_conformance.peers.base import Peer
from nczarr_conformance.peers.capabilities import PURE_ZARR, PURE_ZARR_V3

INT32 = {"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "int32", "fill_value": 0,
         "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
         "chunk_key_encoding": {"name": "default"}, "dimension_names": ["x"], "attributes": {},
         "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "gzip",
                                                                              "configuration": {"level": 1}}]}


class Writer(Peer):
    id, writes, capabilities = "planted-writer", True, PURE_ZARR_V3

    def read(self, url: str) -> Dataset:
        raise NotImplementedError


class Reader(Peer):
    id, reads, capabilities = "planted-reader", True, PURE_ZARR - {"zarr-v3"}

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def read(self, url: str) -> Dataset:
        if isinstance(self.answer, Exception):
            raise self.answer
        data = self.answer(url)
        name = "s" if Path(url).name == "V3.shard" else "m"
        return Dataset(Group(variables={name: Variable("int", ["/x"], data.shape, {}, data)}))


def _context(tmp_path: Path, stores: dict[str, dict[str, Any]]) -> RuleContext:
    """A run in which Writer wrote, for each case, the objects given (JSON documents or bytes)."""
    urls = {}
    for case, objects in stores.items():
        root = tmp_path / case
        for key, value in {"zarr.json": {"zarr_format": 3, "node_type": "group"}, **objects}.items():
            path = root / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(value if isinstance(value, bytes) else json.dumps(value).encode())
        urls[(case, Writer.id)] = str(root)
    return RuleContext(MatrixRun([], [], urls, tmp_path / "work"))


def _good(**changes: Any) -> dict[str, Any]:
    return {**INT32, **changes}


def test_every_v3_rule_is_in_the_registry_once():
    ids = [r.id for r in SPEC_RULES]
    assert [i for i in ids if i.startswith("V3.")] == ["V3.codecs", "V3.endian", "V3.keys", "V3.dims", "V3.shard",
                                                        "V3.missing"]
    assert len(ids) == len(set(ids))


def test_a_v2_writer_and_a_reader_are_not_graded_by_the_writer_rules(tmp_path):
    ctx = _context(tmp_path, {"numeric-types": {"v/zarr.json": _good()}})
    v2 = Writer()
    v2.capabilities = PURE_ZARR
    assert rules_v3.v3_codecs(ctx, v2) == ("not-applicable", "writes Zarr v2")
    assert rules_v3.v3_codecs(ctx, Reader(None)) == ("not-applicable", "does not write")


def test_codecs_follow_and_deviate(tmp_path):
    good = _context(tmp_path / "a", {"numeric-types": {"v/zarr.json": _good(), "v/c/0": b"x"}})
    assert rules_v3.v3_codecs(good, Writer())[0] == "follows"
    for codecs, said in [
        ([{"name": "bytes"}, {"name": "bytes"}], "2 array→bytes codecs"),
        ([{"name": "gzip"}, {"name": "bytes", "configuration": {"endian": "little"}}], "bytes→bytes codec before"),
        ([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "transpose"}], "array→array codec after"),
        ([{"name": "sharding_indexed", "configuration": {"codecs": [{"name": "gzip"}],
                                                         "index_codecs": [{"name": "bytes"}]}}],
         "sharding codecs: 0 array→bytes codecs"),
        ([], "no codecs"),
    ]:
        ctx = _context(tmp_path / said[:8], {"numeric-types": {"v/zarr.json": _good(codecs=codecs)}})
        status, evidence = rules_v3.v3_codecs(ctx, Writer())
        assert status == "deviates" and said in evidence and "case numeric-types: /v" in evidence, evidence


def test_nothing_written_is_skipped_not_followed(tmp_path):
    ctx = _context(tmp_path, {})
    assert rules_v3.v3_codecs(ctx, Writer())[0] == "skipped"
    assert rules_v3.v3_endian(ctx, Writer())[0] == "skipped"
    assert rules_v3.v3_keys(ctx, Writer())[0] == "skipped"
    assert rules_v3.v3_dims(ctx, Writer())[0] == "skipped"


def test_endian_is_required_of_multi_byte_types_only(tmp_path):
    no_endian = [{"name": "bytes"}]
    ok = _context(tmp_path / "ok", {"numeric-types": {"b/zarr.json": _good(data_type="uint8", codecs=no_endian),
                                                      "v/zarr.json": _good()}})
    assert rules_v3.v3_endian(ok, Writer()) == ("follows", "1 bytes codecs of multi-byte arrays, each naming its "
                                                           "endian")
    inside_shard = [{"name": "sharding_indexed", "configuration": {"codecs": no_endian, "index_codecs": []}}]
    for codecs in (no_endian, inside_shard):
        bad = _context(tmp_path / str(len(codecs[0])), {"numeric-types": {"v/zarr.json": _good(codecs=codecs)}})
        status, evidence = rules_v3.v3_endian(bad, Writer())
        assert status == "deviates" and "/v (int32): bytes codec without an endian" in evidence, evidence


@pytest.mark.parametrize("encoding, good, bad", [
    ({"name": "default"}, "c/1", "1"),
    ({"name": "default", "configuration": {"separator": "."}}, "c.1", "c/1"),
    ({"name": "v2"}, "1", "c/1"),
    ({"name": "v2", "configuration": {"separator": "/"}}, "1", "c.1"),
])
def test_chunk_keys_follow_the_encoding(tmp_path, encoding, good, bad):
    doc = _good(chunk_key_encoding=encoding)
    ok = _context(tmp_path / "ok", {"numeric-types": {"v/zarr.json": doc, f"v/{good}": b"x"}})
    assert rules_v3.v3_keys(ok, Writer())[0] == "follows"
    broken = _context(tmp_path / "bad", {"numeric-types": {"v/zarr.json": doc, f"v/{good}": b"x", f"v/{bad}": b"x"}})
    status, evidence = rules_v3.v3_keys(broken, Writer())
    assert status == "deviates" and f"/v/{bad} is not a chunk key of encoding" in evidence, evidence


def test_dims_are_dimension_names_not_array_dimensions(tmp_path):
    nested = {"top/zarr.json": _good(dimension_names=["x"]), "g1/zarr.json": {"zarr_format": 3, "node_type": "group"},
              "g1/w/zarr.json": _good(shape=[2, 3], dimension_names=["x", "y"]),
              "g1/g2/zarr.json": {"zarr_format": 3, "node_type": "group"},
              "g1/g2/deep/zarr.json": _good(dimension_names=["y"])}
    assert rules_v3.v3_dims(_context(tmp_path / "ok", {"groups-nested": nested}), Writer())[0] == "follows"
    legacy = {**nested, "top/zarr.json": _good(dimension_names=None, attributes={"_ARRAY_DIMENSIONS": ["x"]})}
    status, evidence = rules_v3.v3_dims(_context(tmp_path / "bad", {"groups-nested": legacy}), Writer())
    assert status == "deviates" and "'/top': None" in evidence and "_ARRAY_DIMENSIONS" in evidence, evidence
    root_only = {"numeric-types": {"v_int/zarr.json": _good(dimension_names=["x"])}}
    assert rules_v3.v3_dims(_context(tmp_path / "root", root_only), Writer())[0] == "follows"


def test_reader_rules_from_what_the_reader_returns(tmp_path):
    ctx = _context(tmp_path, {})
    right = Reader(lambda url: (rules_v3.SHARD_VALUES if url.endswith("V3.shard")
                                else np.array([7.5, 7.5, 1.0, 2.0, 7.5, 7.5, 7.5, 7.5])))
    right.capabilities = PURE_ZARR
    assert rules_v3.v3_shard_read(ctx, right)[0] == "follows"
    assert rules_v3.v3_missing_read(ctx, right)[0] == "follows"
    zeros = Reader(lambda url: np.zeros(8) if url.endswith("V3.missing") else rules_v3.SHARD_VALUES * 0)
    zeros.capabilities = right.capabilities
    assert rules_v3.v3_shard_read(ctx, zeros)[0] == "deviates"
    assert rules_v3.v3_missing_read(ctx, zeros) == (
        "deviates", "m(8), only chunk 1 stored, fill_value 7.5: read [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]")
    failing = Reader(KeyError("s"))
    failing.capabilities = right.capabilities
    assert rules_v3.v3_shard_read(ctx, failing) == (
        "deviates", "s(6,10) in one shard of 2x5 inner chunks (zarr-python 3): reading failed: KeyError: 's'")
    assert rules_v3.v3_shard_read(ctx, Reader(None))[0] == "not-applicable"  # no zarr-v3 declared


def test_the_rules_inputs_are_what_zarr_python_wrote(tmp_path):
    """The reader rules' stores: one shard of 2x5 inner chunks; only chunk 1 of m stored."""
    ctx = _context(tmp_path, {})
    shard = ctx.built("V3.shard", rules_v3._write_sharded)
    doc = json.loads((shard / "s" / "zarr.json").read_text())
    assert doc["codecs"][0]["name"] == "sharding_indexed" and doc["codecs"][0]["configuration"]["chunk_shape"] == [2, 5]
    assert sorted(p.name for p in (shard / "s" / "c").rglob("*") if p.is_file()) == ["0"]
    missing = ctx.built("V3.missing", rules_v3._write_missing)
    assert sorted(str(p.relative_to(missing / "m")) for p in (missing / "m" / "c").rglob("*") if p.is_file()) == \
        ["c/1"]


def test_dims_judges_groups_nested_alone_when_it_was_written(tmp_path):
    """numeric-types is only the fallback of a root-only writer: with groups-nested written, its arrays
    (here without dimension_names) are not judged, and groups-nested's own are."""
    nested = {"top/zarr.json": _good(dimension_names=["x"]), "g1/zarr.json": {"zarr_format": 3, "node_type": "group"},
              "g1/w/zarr.json": _good(shape=[2, 3], dimension_names=["x", "y"]),
              "g1/g2/zarr.json": {"zarr_format": 3, "node_type": "group"},
              "g1/g2/deep/zarr.json": _good(dimension_names=["y"])}
    both = {"groups-nested": nested, "numeric-types": {"v_int/zarr.json": _good(dimension_names=None)},
            "big-endian": {"v/zarr.json": _good(dimension_names=None)}, "f-order": {"a/zarr.json": _good()}}
    assert rules_v3.v3_dims(_context(tmp_path, both), Writer())[0] == "follows"
    only = {"numeric-types": {"v_int/zarr.json": _good(dimension_names=None)}, "big-endian": both["big-endian"],
            "f-order": {"a/zarr.json": _good(dimension_names=["q"])},
            "scalar": {"d/zarr.json": _good(dimension_names=["q"])}}
    status, evidence = rules_v3.v3_dims(_context(tmp_path / "b", only), Writer())
    assert status == "deviates" and evidence == "case numeric-types: dimension_names {'/v_int': None}", evidence
