"""The committed reports are what the command produces now; our implementation never deviates."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nczarr_conformance.cli.report import own_deviations
from nczarr_conformance.conformance.matrix import run_matrix
from nczarr_conformance.conformance.render import write_reports
from nczarr_conformance.conformance.rules import evaluate_rules
from nczarr_conformance.peers.base import PEERS
from tests.conftest import REPO

FILES = ("interop.json", "interop.md", "interop.html", "rules.json", "rules.md", "rules.html")


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    work = tmp_path_factory.mktemp("matrix")
    run = run_matrix(work / "stores")
    results = evaluate_rules(run)
    write_reports(run, results, work / "reports")
    return run, results, work / "reports"


def _stable(name: str, text: str) -> str:
    """The report without its timestamp and without the values inside difference lines.

    netcdf-c 4.9.0 returns compressed chunk bytes, and then uninitialised memory, as data:
    which garbage it shows changes from run to run, where the differences are does not.
    """
    if name.endswith(".json"):
        doc = json.loads(text)
        doc.pop("generated", None)
        for cell in doc.get("cells", []):
            cell["differences"] = [d.split(": ", 1)[0] for d in cell["differences"]]
        return json.dumps(doc, indent=1, sort_keys=True)
    text = re.sub(r"\d{4}-\d\d-\d\dT[\d:]+Z", "<generated>", text)
    return re.sub(r": [^\n<]*? != [^\n;<]*", ": …", text)


def test_every_peer_is_installed_so_every_cell_is_a_real_run(fresh):
    run, _, _ = fresh
    missing = {i["id"]: i["reason"] for i in run.implementations if not i["available"]}
    assert missing == {}, f"peers missing, their cells would be skipped: {missing}"


@pytest.mark.parametrize("name", FILES)
def test_committed_report_is_current(fresh, name):
    _, _, out = fresh
    committed = REPO / "reports" / name
    assert committed.exists(), f"reports/{name} missing: run `nczarr-conformance report`"
    assert _stable(name, committed.read_text(encoding="utf-8")) == \
        _stable(name, (out / name).read_text(encoding="utf-8")), \
        f"reports/{name} is stale: run `nczarr-conformance report` and commit it"


def test_our_implementation_has_no_deviation(fresh):
    run, results, _ = fresh
    assert own_deviations(run.cells, results) == []
    ours = [c for c in run.cells if c.writer == "ours" and c.reader == "ours"]
    assert ours and all(c.status in ("pass", "skipped") for c in ours)


def test_contract_shapes(fresh):
    _, _, out = fresh
    interop = json.loads((out / "interop.json").read_text())
    assert interop["report"] == "nczarr-interop/1"
    ids = {i["id"] for i in interop["implementations"]}
    assert {"ours", "netcdf-c-4.10", "netcdf-c-4.9", "zarr-python", "xarray", "gdal", "tensorstore"} <= ids
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


def test_html_is_one_page_with_no_external_assets(fresh):
    _, _, out = fresh
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
    assert by[("char-attr-json-number", "ours", "netcdf-c-4.10")].status == "deviates"
    assert by[("double-attr-precision", "netcdf-c-4.10", "ours")].status == "deviates"
    rule = {(r.rule, r.implementation): r.status for r in results}
    assert rule[("D.write.2", "netcdf-c-4.10")] == "deviates"
    assert rule[("Z.fill", "netcdf-c-4.10")] == "deviates"


@pytest.mark.matrix
def test_regenerate_reports():
    """`pytest -m matrix` rewrites reports/ like `nczarr-conformance report` does."""
    import shutil
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="ncz-matrix-"))
    try:
        run = run_matrix(work)
        write_reports(run, evaluate_rules(run), REPO / "reports")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert all((REPO / "reports" / f).exists() for f in FILES)
