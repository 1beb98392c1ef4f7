"""nczarr-check's report for CI and people: findings by severity (error, warning, info; then rule id, then key) in
every format; SARIF 2.1.0 validated against OASIS's schema (tests/data); JUnit XML validated against Jenkins'
junit-10.xsd (tests/data); the HTML page with the tool's version, the time, rule links and fix commands."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import xmlschema

from nczarr_conformance import __version__
from tests.conftest import REPO, require_module

RANKS = {"error": 0, "warning": 1, "info": 2}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """nc2nczarr's default output of a CF station file (char as >S1: warnings a fix cures), with one .zarray
    made wrong (order "Z": an error)."""
    netCDF4 = require_module("netCDF4")
    top = tmp_path_factory.mktemp("formats")
    src = top / "st.nc"
    with netCDF4.Dataset(src, "w") as nc:
        nc.createDimension("station", 2)
        nc.createDimension("name_strlen", 4)
        nc.createVariable("station_name", "S1", ("station", "name_strlen"))[:] = netCDF4.stringtochar(
            np.array(["ab", "cd"], dtype="S4"))
        nc.createVariable("temp", "f4", ("station",))[:] = [1.0, 2.0]
    out = top / "st.zarr"
    subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", "-q", str(src), str(out)], check=True,
                   timeout=120)
    zarray = out / "temp" / ".zarray"
    zarray.write_text(zarray.read_text().replace('"order": "C"', '"order": "Z"'))
    return out


def _check(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.check", *args, str(store)],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))


def _ordered(rows: list[tuple[str, str, str]]) -> bool:
    keys = [(RANKS[sev], rule, key) for sev, rule, key in rows]
    return keys == sorted(keys)


def test_findings_are_ordered_by_severity_then_rule_then_key(store):
    text = _check(store)
    rows = [(*tuple(line.split(" ", 2)[:2]), line.split(" ", 2)[2].split(":", 1)[0])
            for line in text.stdout.splitlines()[:-1]]
    severities = [r[0] for r in rows]
    assert "error" in severities and "warning" in severities
    assert severities.index("error") < severities.index("warning")
    assert _ordered(rows)
    doc = json.loads(_check(store, "--format", "json").stdout)
    assert _ordered([(f["severity"], f["rule"], f["key"] or "") for f in doc["findings"]])
    page = _check(store, "--format", "html").stdout
    shown = re.findall(r'<tr class="(\w+)"><td>\w+</td><td><a href="[^"]*"><code>([^<]+)</code></a></td><td><code>'
                       r'([^<]+)</code>', page)
    assert [r[1] for r in shown] == [f["rule"] for f in doc["findings"]]


def test_sarif_is_valid_and_holds_one_result_per_finding(store):
    schema = json.loads((REPO / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())
    found = json.loads(_check(store, "--format", "json").stdout)["findings"]
    run = _check(store, "--format", "sarif")
    assert run.returncode == 1  # the exit code does not depend on the format
    log = json.loads(run.stdout)
    jsonschema.Draft4Validator(schema).validate(log)
    (sarif_run,) = log["runs"]
    driver = sarif_run["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("nczarr-check", __version__)
    results = sarif_run["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [
        (f["rule"], {"error": "error", "warning": "warning", "info": "note"}[f["severity"]]) for f in found]
    for r, f in zip(results, found, strict=True):
        assert driver["rules"][r["ruleIndex"]]["id"] == r["ruleId"]
        assert r["message"]["text"].startswith(f["message"])
        (loc,) = r["locations"]
        assert loc["logicalLocations"] == [{"fullyQualifiedName": f["key"], "kind": "object"}]
        assert loc["physicalLocation"]["artifactLocation"] == {"uri": f["key"].lstrip("/"), "uriBaseId": "STORE0"}
    assert sarif_run["originalUriBaseIds"]["STORE0"]["uri"] == store.resolve().as_uri() + "/"
    char = next(r for r in results if r["ruleId"] == "NCZ-INTEROP-ZARR-CHAR")
    assert char["properties"]["fixCommand"] == f"nczarr-fix --for zarr-python,xarray {store}"
    assert char["message"]["text"].endswith(f"Fix: nczarr-fix --for zarr-python,xarray {store}")
    page = (REPO / "docs" / "rules.md").read_text()
    for rule in driver["rules"]:
        anchor = rule["helpUri"].split("docs/rules.md#", 1)[1]
        assert f'<a id="{anchor}"></a>`{rule["id"]}`' in page


def test_junit_is_valid_with_a_testcase_per_rule_run(store):
    schema = xmlschema.XMLSchema(str(REPO / "tests" / "data" / "junit-10.xsd"))
    found = json.loads(_check(store, "--format", "json").stdout)["findings"]
    for fail_on, failing in (("error", {"error"}), ("warning", {"error", "warning"})):
        out = _check(store, "--format", "junit", "--fail-on", fail_on).stdout
        schema.validate(out)
        (suite,) = ET.fromstring(out)
        cases = {c.get("name"): c for c in suite}
        listed = [line.split("\t")[0] for line in _check(store, "--list-rules").stdout.splitlines()]
        assert set(cases) <= set(listed) and {f["rule"] for f in found} <= set(cases)
        assert len(cases) == int(suite.get("tests")) > 40  # every rule run, not only those with findings
        failed = {name for name, c in cases.items() if c.find("failure") is not None}
        assert failed == {f["rule"] for f in found if f["severity"] in failing}
        assert int(suite.get("failures")) == len(failed)
    only = _check(store, "--format", "junit", "--select", "NCZ-INTEROP-ZARR-CHAR,NCZ-ARRAY-ORDER").stdout
    (suite,) = ET.fromstring(only)
    assert sorted(c.get("name") for c in suite) == ["NCZ-ARRAY-ORDER", "NCZ-INTEROP-ZARR-CHAR"]


def test_html_shows_version_time_rule_links_and_fix_commands(store):
    page = _check(store, "--format", "html").stdout
    assert f"nczarr-check {__version__} report" in page
    assert re.search(r"<p>checked \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ</p>", page)
    assert ('<a href="https://github.com/nczarr-conformance/nczarr-conformance/blob/main/docs/rules.md'
            '#ncz-interop-zarr-char"><code>NCZ-INTEROP-ZARR-CHAR</code></a>') in page
    assert f"<code>nczarr-fix --for zarr-python,xarray {store}</code> (NCZ-FIX-CHAR-S1)" in page
