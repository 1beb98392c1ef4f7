"""nczarr-check's command line on real stores: corpus/rich.nc converted by nc2nczarr, then broken by hand.

Which findings a store must carry comes from the source file read by netCDF4-python
(an unlimited dimension, string and scalar variables), never from the checker itself.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import jsonschema
import netCDF4
import pytest

from nczarr_conformance.checker import RULES
from nczarr_conformance.checker.report import RULES_DOC
from nczarr_conformance.checker.rules import Severity, rule
from tests.check.test_check import REPORT_SCHEMA
from tests.conftest import CORPUS, require_module

RICH_NC = CORPUS / "rich.nc"


def run(*args: str, module: str = "check") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", f"nczarr_conformance.cli.{module}", *args], capture_output=True,
                          check=False, text=True, timeout=120)


def assert_one_line_failure(result: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert result.returncode == code, result
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def findings(result: subprocess.CompletedProcess[str]) -> list[tuple[str, str, str | None]]:
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, REPORT_SCHEMA)
    return [(f["rule"], f["severity"], f["key"]) for f in doc["findings"]]


@pytest.fixture(scope="module")
def rich_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "rich.file"
    converted = run(str(RICH_NC), str(out), module="convert")
    assert converted.returncode == 0, converted.stderr
    return out


@pytest.fixture
def broken_store(rich_store: Path, tmp_path: Path) -> Path:
    """rich.file with /v_i4/.zarray's order made invalid: one NCZ-ARRAY-ORDER error."""
    path = tmp_path / "broken.file"
    shutil.copytree(rich_store, path)
    zarray = path / "v_i4" / ".zarray"
    doc = json.loads(zarray.read_text())
    doc["order"] = "X"
    zarray.write_text(json.dumps(doc))
    return path


def source_facts() -> dict[str, bool]:
    with netCDF4.Dataset(RICH_NC) as ds:
        return {"unlimited": any(d.isunlimited() for d in ds.dimensions.values()),
                "string": any(v.dtype is str and v.ndim for v in ds.variables.values()),
                "scalar": any(v.ndim == 0 for v in ds.variables.values())}


# ---- --select / --ignore ---------------------------------------------------------------------

def test_select_a_prefix_keeps_exactly_those_rules(rich_store):
    facts = source_facts()
    assert all(facts.values())  # rich.nc has all three; in the 4.10 layout netcdf-c 4.9.0 crashes on strings only
    result = run("--format", "json", "--select", "NCZ-INTEROP-C490", str(rich_store))
    assert result.returncode == 0, result.stderr
    rules = {r for r, _, _ in findings(result)}
    assert "NCZ-INTEROP-C490-STRING" in rules
    assert not {"NCZ-INTEROP-C490-UNLIMITED", "NCZ-INTEROP-C490-SCALAR"} & rules  # tests/check/test_interop.py
    assert all(r.startswith("NCZ-INTEROP-C490-") for r in rules)


def test_select_several_ids_and_ignore_a_prefix(rich_store):
    everything = {r for r, _, _ in findings(run("--format", "json", str(rich_store)))}
    assert any(r.startswith("NCZ-INTEROP-") for r in everything)
    ignored = {r for r, _, _ in findings(run("--format", "json", "--ignore", "NCZ-INTEROP", str(rich_store)))}
    assert ignored == {r for r in everything if not r.startswith("NCZ-INTEROP-")}
    picked = run("--format", "json", "--select", "NCZ-INTEROP-C490-STRING,NCZ-INTEROP-C490-SCALAR",
                 "--ignore", "NCZ-INTEROP-C490-SCALAR", str(rich_store))
    assert {r for r, _, _ in findings(picked)} == {"NCZ-INTEROP-C490-STRING"}


def test_select_keeps_an_error_and_its_exit_code(broken_store):
    result = run("--format", "json", "--select", "NCZ-ARRAY", str(broken_store))
    assert result.returncode == 1
    assert findings(result) == [("NCZ-ARRAY-ORDER", "error", "/v_i4/.zarray")]
    assert run("--ignore", "NCZ-ARRAY-ORDER", str(broken_store)).returncode == 0


@pytest.mark.parametrize("pattern", ["NCZ-NOPE", "NCZ-INTEROP-C49"])  # a prefix ends at a '-'
def test_select_naming_no_rule_is_a_usage_error(rich_store, pattern):
    line = assert_one_line_failure(run("--select", pattern, str(rich_store)))
    assert line == f"nczarr-check: no rule matches {pattern!r} (see --list-rules)"


# ---- --fail-on --------------------------------------------------------------------------------

def test_fail_on_levels(rich_store, tmp_path):
    doc = json.loads(run("--format", "json", str(rich_store)).stdout)
    assert doc["summary"]["errors"] == 0 and doc["summary"]["warnings"] > 0 and doc["summary"]["infos"] == 0
    # written with noxarray: no _ARRAY_DIMENSIONS, so one info (NCZ-INTEROP-XARRAY-NODIMS) per array
    rich_store = tmp_path / "noxarray.file"
    converted = run(str(RICH_NC), f"file://{rich_store}#mode=nczarr,file,noxarray", module="convert")
    assert converted.returncode == 0, converted.stderr
    doc = json.loads(run("--format", "json", str(rich_store)).stdout)
    assert doc["summary"]["errors"] == 0 and doc["summary"]["warnings"] > 0 and doc["summary"]["infos"] > 0
    assert run(str(rich_store)).returncode == 0
    assert run("--fail-on", "error", str(rich_store)).returncode == 0
    assert run("--fail-on", "warning", str(rich_store)).returncode == 1
    assert run("--fail-on", "info", str(rich_store)).returncode == 1
    warnings = sorted({f["rule"] for f in doc["findings"] if f["severity"] == "warning"})
    assert run("--fail-on", "warning", "--ignore", ",".join(warnings), str(rich_store)).returncode == 0
    assert run("--fail-on", "info", "--ignore", ",".join(warnings), str(rich_store)).returncode == 1


# ---- -o, --format html -----------------------------------------------------------------------

def test_output_file_holds_what_stdout_would(rich_store, tmp_path):
    to_stdout = run(str(rich_store))
    result = run("-o", str(tmp_path / "report.txt"), str(rich_store))
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""
    assert (tmp_path / "report.txt").read_text() == to_stdout.stdout


def test_output_file_in_a_missing_directory(rich_store, tmp_path):
    line = assert_one_line_failure(run("-o", str(tmp_path / "no" / "r.txt"), str(rich_store)))
    assert line.startswith(f"nczarr-check: {tmp_path / 'no' / 'r.txt'}: cannot write the report")


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend(attrs)

    def handle_data(self, data):
        self.text.append(data)


def test_html_is_one_self_contained_escaped_page(rich_store, tmp_path):
    path = tmp_path / "hostile.file"
    shutil.copytree(rich_store, path)
    name = '<img src=x onerror="alert(1)">&amp'
    (path / "v_i4" / name).write_text("{}")  # a stray object: NCZ-STORE-STRAY names it in its key
    zattrs = json.loads((path / ".zattrs").read_text())
    zattrs[name] = 1  # an untyped attribute: NCZ-ATTR-UNTYPED names it in its message
    (path / ".zattrs").write_text(json.dumps(zattrs))
    result = run("--format", "html", "-o", str(tmp_path / "r.html"), str(path))
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "r.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    parsed = _Page()
    parsed.feed(page)
    assert "script" not in parsed.tags and "link" not in parsed.tags and "img" not in parsed.tags
    assert not [v for k, v in parsed.attrs if k == "src"]
    # the one kind of link: each rule's row in docs/rules.md (a key or message cannot add one: escaped below)
    assert [v for k, v in parsed.attrs if k == "href"] and all(
        v is not None and v.startswith(f"{RULES_DOC}#ncz-") for k, v in parsed.attrs if k == "href")
    assert name not in page and "&lt;img src=x" in page
    text = "".join(parsed.text)  # the escaped text reads back as the key and the message
    assert f"/v_i4/{name}" in text and f"no _nczarr_attr type for {name!r}" in text


# ---- several URLs ----------------------------------------------------------------------------

def test_several_urls_one_report_each_exit_code_the_worst(rich_store, broken_store):
    text = run(str(rich_store), str(broken_store))
    assert text.returncode == 1
    summaries = [line for line in text.stdout.splitlines() if ": flavor " in line]
    assert [s.split(": flavor")[0] for s in summaries] == [str(rich_store), str(broken_store)]
    doc = json.loads(run("--format", "json", str(rich_store), str(broken_store)).stdout)
    assert [d["url"] for d in doc] == [str(rich_store), str(broken_store)]
    for report in doc:
        jsonschema.validate(report, REPORT_SCHEMA)
    assert [d["summary"]["errors"] for d in doc] == [0, 1]


def test_several_urls_one_cannot_be_opened(rich_store, broken_store, tmp_path):
    missing = tmp_path / "missing.file"
    result = run(str(missing), str(rich_store), str(broken_store))
    line = assert_one_line_failure(result, 2)
    assert line == f"nczarr-check: {missing}: no such file or directory"
    summaries = [s.split(": flavor")[0] for s in result.stdout.splitlines() if ": flavor " in s]
    assert summaries == [str(rich_store), str(broken_store)]  # the others are still checked


# ---- --list-rules ----------------------------------------------------------------------------

def test_list_rules_from_the_registry():
    result = run("--list-rules")
    assert result.returncode == 0 and result.stderr == ""
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert all(len(r) == 4 and all(r) for r in rows)
    assert sorted(r[0] for r in rows) == sorted(RULES) and len(rows) == len(RULES)
    for rid, severity, what, source in rows:
        assert severity.split()[0] == str(RULES[rid].severity)
        assert what == RULES[rid].description and source == RULES[rid].source
    doc = json.loads(run("--list-rules", "--format", "json").stdout)
    assert {d["rule"]: d["severity"] for d in doc} == {r.id: str(r.severity) for r in RULES.values()}


def test_registry_refuses_a_duplicate_id_and_a_missing_source():
    def again(ctx):
        """x."""
        return iter(())

    with pytest.raises(ValueError, match="registered twice"):
        rule("NCZ-ARRAY-ORDER", Severity.ERROR, source="x")(again)
    with pytest.raises(ValueError, match="needs a source"):
        rule("NCZ-TEST-NOSOURCE", Severity.ERROR, source=" ")(again)
    assert "NCZ-TEST-NOSOURCE" not in RULES


def test_no_url_is_a_usage_error():
    assert assert_one_line_failure(run()).startswith("nczarr-check: give at least one URL")


# ---- failures that say what to do ------------------------------------------------------------

def test_netcdf4_file_says_convert_it():
    line = assert_one_line_failure(run(str(RICH_NC)))
    assert line == f"nczarr-check: {RICH_NC}: is a netCDF file, not a store: convert it with nc2nczarr"


def test_classic_netcdf_file_says_convert_it(tmp_path):
    path = tmp_path / "classic.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("x", 2)
    line = assert_one_line_failure(run(str(path)))
    assert line == f"nczarr-check: {path}: is a netCDF file, not a store: convert it with nc2nczarr"


@pytest.mark.parametrize("module", ["check", "dump"])
def test_zarr_v3_store_is_read(tmp_path, module):
    """Issue #25: a Zarr v3 store is read (it was refused as "not supported yet")."""
    zarr = require_module("zarr")
    group = zarr.open_group(str(tmp_path / "v3.zarr"), mode="w", zarr_format=3)
    group.create_array("a", shape=(2,), dtype="i4")
    assert (tmp_path / "v3.zarr" / "zarr.json").is_file()
    result = run(str(tmp_path / "v3.zarr"), module=module)
    assert result.returncode == 0, result.stderr
    if module == "check":
        assert "flavor zarr-v3" in result.stdout and "NCZ-V3-INTEROP-NETCDFC" in result.stdout
    else:
        assert "int a(_Anonymous_Dim_2) ;" in result.stdout and " a = 0, 0 ;" in result.stdout


def test_a_bug_says_how_to_report_it(rich_store, monkeypatch, capsys):
    from nczarr_conformance.cli import check as cli

    def broken(*args, **kwargs):
        raise RuntimeError("invariant\nbroken")

    monkeypatch.setattr(cli, "check", broken)
    monkeypatch.delenv("NCZARR_DEBUG", raising=False)
    assert cli.main([str(rich_store)]) == 2
    err = capsys.readouterr().err
    assert err == ("nczarr-check: unexpected RuntimeError: invariant broken: this is a bug in nczarr-conformance: "
                   "please report it with the command and NCZARR_DEBUG=1 output\n")


def test_check_for_keeps_only_the_named_readers_predictions(tmp_path):
    """--for xarray keeps xarray's predictions (>S1 char) and every non-prediction rule, and drops netcdf-c 4.9.0's
    and TensorStore's; --readers then tries xarray for real (it fails on the >S1 char, as predicted)."""
    store = tmp_path / "rich.file"
    converted = run(str(RICH_NC), str(store), module="convert")
    assert converted.returncode == 0, converted.stderr
    every = {f["rule"] for f in json.loads(run("--format", "json", str(store)).stdout)["findings"]}
    assert {"NCZ-INTEROP-ZARR-CHAR", "NCZ-INTEROP-C490-CHAR", "NCZ-INTEROP-TS-FILTERS"} <= every
    done = run("--format", "json", "--for", "xarray", "--readers", str(store))
    doc = json.loads(done.stdout)
    kept = {f["rule"] for f in doc["findings"]}
    assert "NCZ-INTEROP-ZARR-CHAR" in kept and not kept & {"NCZ-INTEROP-C490-CHAR", "NCZ-INTEROP-TS-FILTERS"}
    assert every - kept == {r for r in every if r.startswith(("NCZ-INTEROP-C490", "NCZ-INTEROP-TS", "NCZ-INTEROP-GDAL",
                                                              "NCZ-INTEROP-C410"))}
    [card] = doc["readers"]
    assert (card["reader"], card["tried"]) == ("xarray", "fails") and "NCZ-INTEROP-ZARR-CHAR" in card["predicted"]
    assert run("--for", "xarray,netcdf-c-5", str(store)).returncode == 2
