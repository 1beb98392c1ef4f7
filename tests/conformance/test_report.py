"""The committed reports are what the command produces now; our implementation never does worse than a peer."""
from __future__ import annotations

import copy
import html
import json
import os
import re

import numpy as np
import pytest

from nczarr_conformance.cli import report as report_cli
from nczarr_conformance.cli.report import own_deviations
from nczarr_conformance.conformance import gate
from nczarr_conformance.conformance import matrix as matrix_module
from nczarr_conformance.conformance.matrix import run_matrix
from nczarr_conformance.conformance.render import write_reports
from nczarr_conformance.conformance.rules import evaluate_rules
from nczarr_conformance.peers.base import registered
from nczarr_conformance.peers.command import CONFIG_NAME, build, load_config
from tests.conftest import REPO

FILES = ("interop.json", "interop.md", "interop.html", "rules.json", "rules.md", "rules.html")

#: Differences whose peer-side value is not reproducible, by exact location: (case, writer, reader) → the
#: difference paths whose right-hand value is taken from the committed report. Everything else — every status,
#: every other difference, the intended (left) value and the path of these — must match byte for byte.
MASKED: dict[tuple[str, str, str], tuple[str, ...]] = {
    # Debian's netcdf-c 4.9.0 has no codecs, so it returns the compressed chunk as data: chunk 0 of /i holds 44
    # compressed bytes for 64 raw ones, so i[0..10] are the compressed bytes (reproducible) and i[11] is read past
    # the end of that buffer — uninitialised heap memory, which changes with the length of the work path.
    ("shuffle-zlib", "zarr-python", "netcdf-c-4.9"): ("/arrays//i[11]",),
    ("shuffle-zlib", "ours-zarr", "netcdf-c-4.9"): ("/arrays//i[11]",),
    # ncks (nczarr-conformance.toml) reads through the same netcdf-c 4.9.0: the same uninitialised value
    ("shuffle-zlib", "zarr-python", "ncks"): ("/arrays//i[11]",),
    ("shuffle-zlib", "ours-zarr", "ncks"): ("/arrays//i[11]",),
}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """The matrix and the rules run now, in a temp dir."""
    work = tmp_path_factory.mktemp("matrix")
    # the implementations nobody here wrote join through the committed config only, as any user's would
    # (registered while the module's tests run: the gate looks each implementation up by id)
    with registered(build(load_config(REPO / CONFIG_NAME))):
        # a thread per core, as `nczarr-conformance report` runs it (its --jobs default): the cells wait on peer
        # processes; tests/conformance/test_run_control.py holds that jobs change no cell
        run = run_matrix(work / "stores", jobs=os.cpu_count() or 1)
        yield run, evaluate_rules(run), work


def _mask(run, committed: dict) -> None:
    """Take the committed peer-side value at each MASKED location, after checking the rest of it matches."""
    fresh_cells = {(c.case, c.writer, c.reader): c for c in run.cells}
    old_cells = {(c["case"], c["writer"], c["reader"]): c for c in committed["cells"]}
    for key, paths in MASKED.items():
        cell, old = fresh_cells[key], old_cells[key]
        for path in paths:
            here = [i for i, d in enumerate(cell.differences) if d.startswith(f"{path}: ")]
            there = [d for d in old["differences"] if d.startswith(f"{path}: ")]
            assert len(here) == 1 and len(there) == 1, f"masked location {key} {path} is gone: update MASKED"
            assert cell.differences[here[0]].split(" != ")[0] == there[0].split(" != ")[0], (key, path)
            cell.differences[here[0]] = there[0]


@pytest.fixture(scope="module")
def rendered(fresh):
    """The six reports rendered from this run into the temp dir (never into the repo), with the committed
    timestamp and the MASKED values, so that every other byte can be compared."""
    run, results, work = fresh
    masked = copy.deepcopy(run)
    _mask(masked, json.loads((REPO / "reports" / "interop.json").read_text(encoding="utf-8")))
    committed = json.loads((REPO / "reports" / "interop.json").read_text(encoding="utf-8"))
    out = work / "reports"
    write_reports(masked, results, out, generated=committed["generated"])
    return out


def test_every_peer_is_installed_so_every_cell_is_a_real_run(fresh):
    run, _, _ = fresh
    missing = {i["id"]: i["reason"] for i in run.implementations if not i["available"]}
    assert missing == {}, f"peers missing, their cells would be skipped: {missing}"


@pytest.mark.parametrize("name", FILES)
def test_committed_report_is_current(rendered, name):
    """Byte for byte, but for the timestamp (the committed one is used) and the MASKED peer garbage."""
    committed = REPO / "reports" / name
    assert committed.exists(), f"reports/{name} missing: run `nczarr-conformance report`"
    old = committed.read_text(encoding="utf-8").splitlines()
    new = (rendered / name).read_text(encoding="utf-8").splitlines()
    changed = [f"line {i + 1}:\n  committed: {a[:300]}\n  now:       {b[:300]}"
               for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b]
    assert (changed, len(old)) == ([], len(new)), \
        f"reports/{name} is stale: run `nczarr-conformance report` and commit it\n" + "\n".join(changed[:5])
    assert committed.read_bytes() == (rendered / name).read_bytes()


def test_masked_locations_are_the_only_moving_values(fresh):
    """Each masked location exists in this run and holds a difference of netcdf-c 4.9.0 reading a compressed
    chunk (directly, or through ncks, which links it): the mask cannot hide a change anywhere else."""
    run, _, _ = fresh
    cells = {(c.case, c.writer, c.reader): c for c in run.cells}
    for (case, writer, reader), paths in MASKED.items():
        assert reader in ("netcdf-c-4.9", "ncks") and cells[(case, writer, reader)].status == "deviates"
        assert all(sum(d.startswith(f"{p}: ") for d in cells[(case, writer, reader)].differences) == 1
                   for p in paths)


def test_our_implementation_has_no_deviation(fresh):
    run, results, _ = fresh
    assert own_deviations(run, results) == []
    ours = [c for c in run.cells if c.writer == "ours" and c.reader == "ours"]
    assert ours and all(c.status in ("pass", "skipped") for c in ours)


def test_reader_gate_catches_ours_deviating_where_a_peer_reads_right(fresh):
    """Plant what a reader bug looks like in the run: ours reads zarr-python's string-var wrong, which
    zarr-python reads right. The gate names that cell; the known list cannot excuse it."""
    run, _, _ = fresh
    planted = copy.deepcopy(run)
    key = ("string-var", "zarr-python", "ours")
    cell = next(c for c in planted.cells if (c.case, c.writer, c.reader) == key)
    assert cell.status == "pass" and next(c for c in planted.cells if (c.case, c.writer, c.reader) == (
        "string-var", "zarr-python", "zarr-python")).status == "pass"
    planted.seen[key].root.variables["s"].data = np.array(["", "ascii", "unicode"], dtype=object)
    cell.status, cell.differences = "deviates", ["/arrays//s[2]: planted"]
    errors, _ = gate.explain(planted)
    assert [e for e in errors if "string-var: zarr-python → ours deviates where reader" in e] != []


def test_writer_gate_catches_ours_deviating_where_another_writer_passes(fresh):
    run, _, _ = fresh
    planted = copy.deepcopy(run)
    key = ("scalar", "ours", "zarr-python")
    cell = next(c for c in planted.cells if (c.case, c.writer, c.reader) == key)
    assert cell.status == "pass"
    cell.status, cell.message = "fails", "planted"
    errors, _ = gate.explain(planted)
    assert any(e.startswith("writer gate: scalar: ours → zarr-python fails where writer ") for e in errors)


def test_known_disagreements_hold_their_evidence(fresh):
    """Each listed peer fault is seen in this run and its evidence (a peer treating a peer's store the same
    way) holds; breaking the evidence makes it an error."""
    run, _, _ = fresh
    errors, excused = gate.explain(run)
    assert errors == [] and len(excused) == len(gate.known_entries())
    planted = copy.deepcopy(run)
    ref = next(c for c in planted.cells if (c.case, c.writer, c.reader) == ("char-var", "netcdf-c-4.10", "zarr-python"))
    ref.message = "planted"  # zarr-python no longer refuses netcdf-c 4.10's >S1 as it refuses ours
    errors, _ = gate.explain(planted)
    assert any("char-var: ours → zarr-python" in e and "evidence fails" in e for e in errors)


def test_report_exits_1_when_the_gate_finds_ours_worse(fresh, tmp_path, monkeypatch, capsys):
    run, _, _ = fresh
    # outside the checkout: its nczarr-conformance.toml would declare ncks a second time (fresh registered it)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(matrix_module, "run_matrix", lambda workdir, **kw: run)
    monkeypatch.setattr(gate, "known_entries", lambda: [])
    assert report_cli.main(["report", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert "nczarr-conformance: our implementation deviates: writer gate: char-var: ours → zarr-python fails " \
           "where writer zarr-python, xarray passes: " in "\n".join(err)
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(matrix_module, "run_matrix", lambda workdir, **kw: run)
    assert report_cli.main(["report", "--out", str(tmp_path)]) == 0


def test_contract_shapes(rendered):
    out = rendered
    interop = json.loads((out / "interop.json").read_text())
    assert interop["report"] == "nczarr-interop/1"
    ids = {i["id"] for i in interop["implementations"]}
    assert {"ours", "netcdf-c-4.10", "netcdf-c-4.9", "zarr-python", "xarray", "xarray-datatree", "nczarr-engine",
            "gdal", "tensorstore"} <= ids
    assert {c["status"] for c in interop["cells"]} <= {"pass", "deviates", "fails", "skipped"}
    for c in interop["cells"]:
        assert set(c) >= {"case", "writer", "reader", "status", "differences", "message"}
        assert (c["status"] == "deviates") == bool(c["differences"])
    rules = json.loads((out / "rules.json").read_text())
    assert rules["report"] == "nczarr-rules/1"
    assert {r["id"] for r in rules["rules"]} >= {"D.write.1", "D.write.2", "D.write.3", "D.write.4", "D.read.1",
                                                  "D.read.2", "D.read.3", "D.read.4", "E.char", "E.string",
                                                  "E.maxstrlen", "X.dims", "Z.scalar", "Z.fill", "Z.infer"}
    assert {r["status"] for r in rules["results"]} <= {"follows", "deviates", "not-applicable", "skipped"}


def test_html_is_one_page_with_no_external_assets(rendered):
    out = rendered
    for name in ("interop.html", "rules.html"):
        text = (out / name).read_text()
        assert text.startswith("<!DOCTYPE html>")
        assert not re.search(r"""(src|href)=["'](https?:)?//""", text)
        assert "<script" not in text and "<link" not in text
        for anchor in set(re.findall(r'href="#([^"]+)"', text)):
            assert f'id="{anchor}"' in text, anchor


def test_known_peer_bugs_appear_as_deviations(fresh):
    run, results, _ = fresh
    by = {(c.case, c.writer, c.reader): c for c in run.cells}
    # netcdf-c 4.10 misreads its own case-3 output; ours (char text as a JSON string by default) it reads right
    assert by[("char-attr-json-number", "netcdf-c-4.10", "netcdf-c-4.10")].differences == \
        ['/root/attributes/answer/value: "42" != "4"']
    assert by[("char-attr-json-number", "ours", "netcdf-c-4.10")].status == "pass"
    assert by[("double-attr-precision", "netcdf-c-4.10", "ours")].status == "deviates"
    rule = {(r.rule, r.implementation): r for r in results}
    assert rule[("D.write.2", "netcdf-c-4.10")].status == "deviates"
    assert rule[("Z.fill", "netcdf-c-4.10")].status == "deviates"
    # netcdf-c 4.10's char-attribute bug, as a reading rule: 42 typed >S1 must read back as the text "42"
    d_read = rule[("D.read.1", "netcdf-c-4.10")]
    assert (d_read.status, d_read.evidence) == ("deviates", ('5 typed <i2 read as short [5]; 42 typed >S1 read as '
                                                            'char "4"'))
    assert rule[("D.read.1", "ours")].status == "follows"


def test_documented_deviations_are_the_only_ones_of_ours_and_none_is_stale(fresh):
    """D.write.3 is our deliberate deviation (lossless char attributes by default): reported as "deviates" with
    the reason, accepted by the gate; an unlisted deviation of ours, or a listed one that no longer deviates, fails."""
    import dataclasses

    from nczarr_conformance.conformance.rules import DOCUMENTED_DEVIATIONS

    run, results = fresh[0], fresh[1]
    ours = {(r.rule, r.implementation): r for r in results if r.implementation == "ours"}
    d3 = ours[("D.write.3", "ours")]
    assert d3.status == "deviates" and d3.evidence.startswith("documented deviation, by choice")
    assert ("D.write.3", "ours") in DOCUMENTED_DEVIATIONS and own_deviations(run, results) == []
    fixed = [dataclasses.replace(r, status="follows") if r is d3 else r for r in results]
    assert own_deviations(run, fixed) == ["D.write.3: ours is listed as a documented deviation but follows"]
    other = next(r for r in results if r.implementation == "ours" and r.status == "follows")
    broken = [dataclasses.replace(r, status="deviates") if r is other else r for r in results]
    assert own_deviations(run, broken) == [f"{other.rule}: ours deviates"]


def test_interop_html_opens_with_the_overview_grid(rendered, fresh):
    """The first table is writer × reader with the counts of each kind, every non-empty cell linking to its pair's
    section; the counts add up to the run's cells (but the corpus's not-applicable ones)."""
    run, _, _ = fresh
    text = (rendered / "interop.html").read_text()
    body = text.split("<body>", 1)[1]
    assert body.index('<table class="o">') < body.index("<table>") and body.index('<table class="o">') < \
        body.index("<h2")
    grid = body[body.index('<table class="o">'):body.index("</table>")]
    links = re.findall(r'<a href="#(p-[^"]+)">([^<]+)</a>', grid)
    writers = [i["id"] for i in run.implementations if i["writes"]]
    readers = [i["id"] for i in run.implementations if i["reads"]]
    assert len(links) == len(writers) * len(readers)
    counted = sum(int(n) for _, text_ in links for n in re.findall(r"\d+", re.sub(r"[^0-9 ]", " ", text_)))
    assert counted == sum(1 for c in run.cells if c.message != matrix_module.NOT_APPLICABLE)
    for anchor, _ in links:
        assert f'<h3 id="{anchor}">' in text


def test_known_peer_faults_are_marked_as_such(rendered):
    text = (rendered / "interop.html").read_text()
    doc = json.loads((rendered / "interop.json").read_text())
    assert len(doc["known_faults"]) == len(gate.known_entries())
    assert text.count('class="c k"') == len(gate.known_entries())  # the case tables' cells, outlined and marked †
    status = {(c["case"], c["writer"], c["reader"]): c["status"] for c in doc["cells"]}
    for k in doc["known_faults"]:
        heading = f"{k['case']}: {k['writer']} → {k['reader']} ({status[(k['case'], k['writer'], k['reader'])]}; † " \
                  f"known peer fault: {k['why']})"
        assert html.escape(heading) in text, heading


def test_every_difference_in_interop_html_names_its_side(rendered):
    """No bare model-diff line is left: each says what the writer was given and what the reader read."""
    text = (rendered / "interop.html").read_text()
    items = re.findall(r"<li>(/root[^<]*|/arrays[^<]*|/attributes[^<]*)</li>", text)
    sided = [i for i in items if " / reader read " in i and len(re.findall(r": writer was (?:not )?given ", i)) == 1]
    assert items and sided == items, [i for i in items if i not in sided][:3]
    assert "only in first" not in text and "only in second" not in text and " != " not in "".join(items)


def test_the_full_run_as_junit_validates_and_marks_every_known_fault(fresh):
    import xml.etree.ElementTree as ET

    import xmlschema

    from nczarr_conformance.conformance.junit import junit_xml

    run, results, _ = fresh
    text = junit_xml(run, results, gate.known_faults(run))
    xmlschema.XMLSchema(str(REPO / "tests" / "data" / "junit-10.xsd")).validate(text)
    root = ET.fromstring(text)
    assert int(root.get("tests")) == len(run.cells) + len(results)
    xfails = [c for c in root.iter("testcase")
              if c.find("skipped") is not None and c.find("skipped").get("type") == "xfail"]
    from nczarr_conformance.conformance.rules import DOCUMENTED_DEVIATIONS

    assert len(xfails) == len(gate.known_entries()) + len(DOCUMENTED_DEVIATIONS)
