"""The known cells of the ported netcdf-c tests say truthfully whose the difference is.

A ``peer`` cell is a strict xfail that only a fixed peer can turn red; a difference of ours by a
documented choice is ``ours-by-design`` (asserted, passing). A cell whose diff holds both is split
(``parts``), so that neither hides behind the other's label.
"""
from __future__ import annotations

import json
import re

import pytest

from tests.netcdf_c.harness import KNOWN_DIR, PASS, Known, judge, load_known
from tests.peers.known import PeerStillWrong

#: words by which a reason blames a choice of ours: such a line belongs to an ours-by-design part
OURS = re.compile(r"by design|STORAGE_INTERNAL|Deliberate|README|docs/(reader|writer)\.md|\bours (writes|hides|reads)|"
                  r"\bour (writer|reader|model|zarr)|\bwe (read|write)", re.IGNORECASE)


def _peer_reasons():
    for path in sorted(KNOWN_DIR.glob("*.json")):
        for cell, entry in json.loads(path.read_text(encoding="utf-8")).items():
            for part in entry.get("parts", [entry]):
                if part["kind"] == "peer":
                    yield f"{path.name}: {cell}", part["reason"]


def test_a_peer_cell_blames_only_the_peer():
    """A reason that names a choice of ours inside a ``peer`` cell means the cell mixes both: split it."""
    mixed = [where for where, reason in _peer_reasons() if OURS.search(reason)]
    assert mixed == []


def test_every_known_file_loads():
    for path in KNOWN_DIR.glob("*.json"):
        load_known(path.stem)


SPLIT = Known(["-peer wrong;", "+peer wrong;"], "the peer's fault", "peer", ("-ours;", "+ours;"), "our choice")


def test_split_cell_is_an_xfail_while_the_peer_is_wrong():
    with pytest.raises(PeerStillWrong):
        judge(SPLIT, ["-peer wrong;", "-ours;", "+peer wrong;", "+ours;"])


def test_split_cell_xpasses_once_the_peer_is_fixed():
    judge(SPLIT, ["-ours;", "+ours;"])  # returns: the strict xfail makes it red, so the cell is re-curated


def test_split_cell_fails_when_our_documented_choice_changes():
    with pytest.raises(AssertionError, match="ours changed"):
        judge(SPLIT, ["-peer wrong;", "+peer wrong;"])
    with pytest.raises(AssertionError, match="ours changed"):
        judge(SPLIT, PASS)


def test_split_cell_fails_when_the_peer_is_wrong_otherwise():
    with pytest.raises(AssertionError, match="the peer changed its behaviour"):
        judge(SPLIT, ["-peer wrong;", "-ours;", "+peer wrong differently;", "+ours;"])


def test_split_parts_are_disjoint(tmp_path, monkeypatch):
    (tmp_path / "x.json").write_text(json.dumps({"c": {"parts": [
        {"kind": "peer", "reason": "r", "outcome": ["-a;"]},
        {"kind": "ours-by-design", "reason": "r", "outcome": ["-a;"]}]}}))
    monkeypatch.setattr("tests.netcdf_c.harness.KNOWN_DIR", tmp_path)
    with pytest.raises(AssertionError, match="disjoint"):
        load_known("x")
