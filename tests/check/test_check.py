"""nczarr-check: valid datasets from every producer pass; one corruption per rule is caught on its key."""
from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest

from nczarr_conformance.checker import RULES, check
from nczarr_conformance.checker.docs import render
from nczarr_conformance.checker.rules import Severity
from nczarr_conformance.model import Attribute, Dataset, Dimension, Group, Variable
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.stores import DirectoryStore
from nczarr_conformance.testing.samples import small_model
from tests.conftest import NETCDF_C_CORPUS, REPO, require_module, require_tool

REPORT_SCHEMA = {
    "type": "object",
    "required": ["report", "url", "flavor", "findings", "summary"],
    "properties": {
        "report": {"const": "nczarr-check/1"},
        "url": {"type": "string"},
        "flavor": {"enum": ["nczarr-v1", "nczarr-2-upper", "nczarr-2", "nczarr-4.10", "zarr", "zarr-v3", "unknown"]},
        "findings": {"type": "array", "items": {
            "type": "object", "required": ["rule", "severity", "key", "message"],
            "properties": {"rule": {"type": "string", "pattern": "^NCZ-[A-Z0-9-]+$"},
                           "severity": {"enum": ["error", "warning", "info"]},
                           "key": {"type": ["string", "null"], "pattern": "^/"},
                           "message": {"type": "string", "minLength": 1},
                           "fix": {"type": "string", "pattern": "^NCZ-FIX-[A-Z0-9-]+$"}}}},
        "summary": {"type": "object", "required": ["errors", "warnings", "infos", "objects_read"],
                    "properties": {k: {"type": "integer", "minimum": 0}
                                   for k in ("errors", "warnings", "infos", "objects_read")}},
    },
}


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.check", *args], capture_output=True,
                          text=True, timeout=120)


def errors(report) -> list[tuple[str, str | None]]:
    return [(f.rule, f.key) for f in report.findings if f.severity == Severity.ERROR]


def test_docs_rules_md_is_generated_from_the_registry():
    assert (REPO / "docs" / "rules.md").read_text() == render()


def test_rule_ids_follow_the_house_pattern():
    import re

    assert all(re.fullmatch(r"NCZ-[A-Z0-9]+(-[A-Z0-9]+)+", rid) for rid in RULES)


# ---- valid datasets from every producer ----------------------------------------------------

def _ours(tmp_path: Path, flavor: str) -> str:
    model = small_model()
    if flavor == "nczarr-2-upper":
        del model.root.variables["s"], model.root.variables["sc"]
        model.root.dimensions["t"].unlimited = False
    with DirectoryStore(tmp_path / f"{flavor}.file", "w") as store:
        write_dataset(model, store, flavor=flavor)
    return str(tmp_path / f"{flavor}.file")


@pytest.mark.parametrize("flavor", ["nczarr-4.10", "nczarr-2-upper", "zarr"])
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_our_writer_passes(tmp_path, flavor, fmt):
    result = run_cli("--deep", "--format", fmt, "--expect", flavor, _ours(tmp_path, flavor))
    assert result.returncode == 0, result.stdout + result.stderr
    if fmt == "json":
        doc = json.loads(result.stdout)
        jsonschema.validate(doc, REPORT_SCHEMA)
        assert doc["flavor"] == flavor and doc["summary"]["errors"] == 0
    else:
        assert result.stdout.strip().splitlines()[-1].endswith("objects read")


def test_netcdf4_python_output_passes(rich_nc, tmp_path):
    from nczarr_conformance.peers import netcdf4
    from nczarr_conformance.urls import to_file_url

    netcdf4.write(netcdf4.read(str(rich_nc)), to_file_url(str(tmp_path / "n.file"), "file"))
    report = check(str(tmp_path / "n.file"), deep=True, expect="nczarr-4.10")
    assert errors(report) == []


def test_ncgen_490_output_passes(tmp_path):
    ncgen = require_tool("ncgen")
    (tmp_path / "t.cdl").write_text('netcdf t { dimensions: x = 3 ; variables: int v(x) ; v:u = "m" ; '
                                    'char c(x) ; data: v = 1, 2, 3 ; c = "ab" ; }')
    url = f"file://{tmp_path}/g.file#mode=nczarr,file"
    subprocess.run([ncgen, "-4", "-b", "-o", url, str(tmp_path / "t.cdl")], check=True, capture_output=True)
    report = check(url, deep=True, expect="nczarr-2-upper")
    assert errors(report) == []
    assert "NCZ-INTEROP-C410-U1CHAR" in {f.rule for f in report.findings}


def test_zarr_python_and_xarray_output_passes(tmp_path):
    zarr = require_module("zarr")
    xr = require_module("xarray")
    g = zarr.open_group(str(tmp_path / "zp.zarr"), mode="w", zarr_format=2)
    g.create_array("a", shape=(5, 4), chunks=(2, 3), dtype="<f8", fill_value=np.nan)[...] = 1.0
    g.create_array("s", shape=(), dtype="<i4", fill_value=0)[...] = 3
    assert errors(check(str(tmp_path / "zp.zarr"), deep=True, expect="zarr")) == []
    ds = xr.Dataset({"t": (("time", "lat"), np.arange(6.0).reshape(2, 3))}, coords={"lat": [1.0, 2.0, 3.0]})
    ds.to_zarr(str(tmp_path / "xr.zarr"), zarr_format=2, consolidated=True)
    report = check(str(tmp_path / "xr.zarr"), deep=True, expect="zarr")
    assert errors(report) == [] and not any(f.rule == "NCZ-INTEROP-XARRAY-NODIMS" for f in report.findings)


CORPUS_STORES = ["ref_byte.zarr.zip", "ref_byte_fill_value_null.zarr.zip", "ref_oldformat.zip",
                 "ref_oldkeys.file.zip", "ref_data.zarr"]


@pytest.mark.parametrize("name", CORPUS_STORES)
def test_corpus_stores_pass(name):
    report = check(str(NETCDF_C_CORPUS / name), deep=True)
    assert errors(report) == [], report.to_text()


def test_corpus_noshape_is_reported_truthfully():
    """ref_noshape is netcdf-c's test of a malformed zarr scalar: 24 bytes for one int and a 1-name
    _ARRAY_DIMENSIONS on a 0-d array. netcdf-c reads it leniently; the checker says what is wrong."""
    report = check(str(NETCDF_C_CORPUS / "ref_noshape.file.zip"), deep=True)
    assert sorted(errors(report)) == [("NCZ-CHUNK-SIZE", "/v/0"), ("NCZ-XARRAY-DIMS", "/v/.zattrs")]


# ---- one corruption per rule ----------------------------------------------------------------

def _base(tmp_path: Path) -> Path:
    root = Group({"x": Dimension(3), "t": Dimension(2, True)},
                 attributes={"title": Attribute("char", "base"), "n": Attribute("short", np.array([1, 2]))})
    root.variables["v"] = Variable("int", ["/t", "/x"], (2, 3), {"_FillValue": Attribute("int", np.array([-1]))},
                                   np.arange(6, dtype="i4").reshape(2, 3), chunks=[1, 2])
    root.variables["s"] = Variable("string", ["/x"], (3,), {}, np.array(["a", "b", "c"], dtype=object))
    root.variables["sc"] = Variable("double", [], (), {}, np.array(1.5))
    root.groups["g"] = Group({"y": Dimension(2)})
    root.groups["g"].variables["w"] = Variable("ubyte", ["/x", "/g/y"], (3, 2), {},
                                               np.arange(6, dtype="u1").reshape(3, 2))
    path = tmp_path / "base.file"
    with DirectoryStore(path, "w") as store:
        # each corruption edits one object; a .zmetadata would flag every edit as stale too
        # (NCZ-CONSOLIDATED-MATCH has its own corruption below)
        write_dataset(Dataset(root), store, consolidate=False)
    return path


def edit_json(path: Path, key: str, change: Callable[[Any], Any]) -> None:
    target = path / key.lstrip("/")
    doc = json.loads(target.read_text())
    change(doc)  # mutates doc in place
    target.write_text(json.dumps(doc))


CORRUPTIONS: dict[str, tuple[str | None, Callable[[Path], None]]] = {
    "NCZ-JSON-SYNTAX": ("/v/.zarray", lambda p: (p / "v/.zarray").write_text("{bad json")),
    "NCZ-JSON-OBJECT": ("/v/.zattrs", lambda p: (p / "v/.zattrs").write_text("[1, 2]")),
    "NCZ-GROUP-FORMAT": ("/g/.zgroup", lambda p: edit_json(p, "/g/.zgroup", lambda d: d.update(zarr_format=3))),
    "NCZ-SUPERBLOCK-VERSION": ("/.zattrs", lambda p: edit_json(
        p, "/.zattrs", lambda d: d["_nczarr_superblock"].update(version="9.9.9"))),
    "NCZ-GROUP-META": ("/g/.zattrs", lambda p: edit_json(p, "/g/.zattrs", lambda d: d.pop("_nczarr_group"))),
    "NCZ-DIM-DEF": ("/.zattrs", lambda p: edit_json(
        p, "/.zattrs", lambda d: d["_nczarr_group"]["dimensions"].update(x="three"))),
    "NCZ-GROUP-GHOST": ("/.zattrs", lambda p: edit_json(
        p, "/.zattrs", lambda d: d["_nczarr_group"]["arrays"].append("nope"))),
    "NCZ-GROUP-UNLISTED": ("/v/.zarray", lambda p: edit_json(
        p, "/.zattrs", lambda d: d["_nczarr_group"]["arrays"].remove("v"))),
    "NCZ-ARRAY-MEMBERS": ("/v/.zarray", lambda p: edit_json(p, "/v/.zarray", lambda d: d.pop("order"))),
    "NCZ-ARRAY-FORMAT": ("/v/.zarray", lambda p: edit_json(p, "/v/.zarray", lambda d: d.update(zarr_format=3))),
    "NCZ-ARRAY-SHAPE": ("/v/.zarray", lambda p: edit_json(p, "/v/.zarray", lambda d: d.update(shape=[-2, 3]))),
    "NCZ-ARRAY-CHUNKS": ("/v/.zarray", lambda p: edit_json(p, "/v/.zarray", lambda d: d.update(chunks=[0, 2]))),
    "NCZ-ARRAY-INT64": ("/v/.zarray", lambda p: edit_json(p, "/v/.zarray", lambda d: d.update(chunks=[2**63, 2]))),
    "NCZ-ARRAY-DTYPE": ("/v/.zarray", lambda p: edit_json(p, "/v/.zarray", lambda d: d.update(dtype="<c16"))),
    "NCZ-ARRAY-ORDER": ("/v/.zarray", lambda p: edit_json(p, "/v/.zarray", lambda d: d.update(order="X"))),
    "NCZ-ARRAY-SEPARATOR": ("/v/.zarray", lambda p: edit_json(
        p, "/v/.zarray", lambda d: d.update(dimension_separator="-"))),
    "NCZ-ARRAY-FILL": ("/v/.zarray", lambda p: edit_json(p, "/v/.zarray", lambda d: d.update(fill_value="abc"))),
    "NCZ-ARRAY-CODEC": ("/v/.zarray", lambda p: edit_json(
        p, "/v/.zarray", lambda d: d.update(compressor={"id": "no-such-codec"}))),
    "NCZ-ARRAY-META": ("/v/.zattrs", lambda p: edit_json(p, "/v/.zattrs", lambda d: d.pop("_nczarr_array"))),
    "NCZ-DIM-REF": ("/v/.zattrs", lambda p: edit_json(
        p, "/v/.zattrs", lambda d: d["_nczarr_array"].update(dimension_references=["/nope", "/x"]))),
    "NCZ-DIM-SIZE": ("/v/.zarray", lambda p: edit_json(p, "/v/.zarray", lambda d: d.update(shape=[2, 4]))),
    "NCZ-SCALAR-SHAPE": ("/sc/.zarray", lambda p: edit_json(
        p, "/sc/.zarray", lambda d: d.update(shape=[2], chunks=[2]))),
    "NCZ-STRING-MAXSTRLEN": ("/s/.zarray", lambda p: edit_json(
        p, "/s/.zattrs", lambda d: d.update(_nczarr_maxstrlen=7))),
    "NCZ-ATTR-TYPE": ("/.zattrs", lambda p: edit_json(p, "/.zattrs", lambda d: d.update(n="abc"))),
    "NCZ-ATTR-NAME-EMPTY": ("/v/.zattrs", lambda p: edit_json(p, "/v/.zattrs", lambda d: d.update({"": 1}))),
    "NCZ-XARRAY-DIMS": ("/v/.zattrs", lambda p: edit_json(
        p, "/v/.zattrs", lambda d: d.update(_ARRAY_DIMENSIONS=["t"]))),
    "NCZ-CHUNK-KEY": ("/v/9.9", lambda p: (p / "v/9.9").write_bytes(b"\0" * 8)),
    "NCZ-CHUNK-DECODE": ("/v/0.0", lambda p: edit_json(
        p, "/v/.zarray", lambda d: d.update(compressor={"id": "zlib", "level": 1}))),
    "NCZ-CHUNK-SIZE": ("/v/0.0", lambda p: (p / "v/0.0").write_bytes((p / "v/0.0").read_bytes()[:5])),
    "NCZ-JSON-NAN": ("/sc/.zarray", lambda p: (p / "sc/.zarray").write_text(
        re.sub(r'"fill_value": *[^,}]+', '"fill_value": NaN', (p / "sc/.zarray").read_text()))),
    "NCZ-JSON-DEPTH": ("/v/.zattrs", lambda p: (p / "v/.zattrs").write_text(
        '{"a": ' + "[" * 10**5 + "]" * 10**5 + "}")),
    "NCZ-STORE-READ": ("/v/0.0", lambda p: ((p / "v/0.0").unlink(), (p / "v/0.0").symlink_to("0.0"))),
    "NCZ-CONSOLIDATED-MATCH": ("/.zmetadata", lambda p: (p / ".zmetadata").write_text(json.dumps(
        {"zarr_consolidated_format": 1, "metadata": {".zgroup": {"zarr_format": 2}}}))),
}


def test_every_error_rule_has_a_corruption_test():
    special = {"NCZ-LAYOUT-NODATASET", "NCZ-STORE-UNSAFE", "NCZ-LAYOUT-FLAVOR", "NCZ-CHECK-CRASH",
               "NCZ-XARRAY-DIMSIZE",  # pure Zarr only: tests/check/test_contract.py
               "NCZ-STORE-KEYCLASH",  # zip and S3 only (a directory cannot hold it): test_contract.py
               "NCZ-ARRAY-NDIM",  # test_contract.py, with zarr-python failing the same way
               "NCZ-V3-READ",  # Zarr v3 only: tests/zarr3/test_access.py::test_check_deep_reports_a_corrupt_chunk
               # Zarr v3 only: tests/zarr3/test_check_v3.py plants each one's defects
               "NCZ-V3-SCHEMA", "NCZ-V3-CODECS", "NCZ-V3-SHARD", "NCZ-V3-CONSOLIDATED",
               # NZ-1.0 only: tests/zarr3/test_nz.py breaks and keeps each one
               *(r for r in RULES if r.startswith("NCZ-NZ-")),
               # kerchunk references and Icechunk virtual chunks only: tests/test_references.py and
               # tests/stores/test_icechunk.py change, remove, truncate and misreference targets
               "NCZ-REF-TARGET", "NCZ-REF-RANGE", "NCZ-REF-CODECS"}
    error_rules = {r.id for r in RULES.values() if r.severity == Severity.ERROR}
    assert error_rules - special == set(CORRUPTIONS) - {"NCZ-XARRAY-DIMS"}


@dataclasses.dataclass
class _Corrupted:
    """Every corruption planted in a base store of its own, and what one ``nczarr-check`` run over all of them
    said per format: the CLI checks many URLs in one process, so 45 stores cost one interpreter per format, not
    one per store (one URL's exit code, and the worst of several: tests/check/test_check_cli.py)."""

    stores: dict[str, Path]
    before: dict[str, dict[Path, bytes]]
    runs: dict[str, subprocess.CompletedProcess[str]]

    def run(self, fmt: str) -> subprocess.CompletedProcess[str]:
        if fmt not in self.runs:
            self.runs[fmt] = run_cli("--deep", "--format", fmt, *(str(p) for p in self.stores.values()))
        return self.runs[fmt]


@pytest.fixture(scope="module")
def corrupted(tmp_path_factory: pytest.TempPathFactory) -> _Corrupted:
    stores, before = {}, {}
    for rule_id in sorted(CORRUPTIONS):
        path = _base(tmp_path_factory.mktemp(rule_id))
        assert errors(check(str(path), deep=True)) == []
        CORRUPTIONS[rule_id][1](path)
        stores[rule_id] = path
        before[rule_id] = {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    return _Corrupted(stores, before, {})


def _text_reports(stdout: str, stores: dict[str, Path]) -> dict[str, list[str]]:
    """The text format's reports, one after another, each ending in its summary line (which names the URL)."""
    reports: dict[str, list[str]] = {}
    lines: list[str] = []
    for line in stdout.splitlines():
        lines.append(line)
        for rule_id, path in stores.items():
            if line.startswith(f"{path}: flavor "):
                reports[rule_id], lines = lines, []
    return reports


@pytest.mark.parametrize("rule_id", sorted(CORRUPTIONS))
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_corruption_is_caught_on_its_key(rule_id, fmt, corrupted):
    key = CORRUPTIONS[rule_id][0]
    path = corrupted.stores[rule_id]
    result = corrupted.run(fmt)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr
    assert result.stderr == ""  # no URL refused (each is reported) and no traceback
    if fmt == "json":
        docs = {d["url"]: d for d in json.loads(result.stdout)}
        assert len(docs) == len(corrupted.stores)
        doc = docs[str(path)]
        jsonschema.validate(doc, REPORT_SCHEMA)
        found = {(f["rule"], f["key"]) for f in doc["findings"] if f["severity"] == "error"}
        assert doc["summary"]["errors"] >= 1
        report = json.dumps(doc)
    else:
        reports = _text_reports(result.stdout, corrupted.stores)
        assert reports.keys() == corrupted.stores.keys()
        lines = reports[rule_id]
        found = {tuple(line.split(" ", 3)[1:3]) for line in lines if line.startswith("error ")}
        found = {(r, k.rstrip(":")) for r, k in found}
        report = "\n".join(lines)
    assert (rule_id, key) in found, report
    assert corrupted.before[rule_id] == {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}  # unmodified


# ---- an attribute named "" (issue 39: it passed nczarr-check and nczarr-dump printed `v: = 1 ;`) ---------------

def test_an_empty_attribute_name_is_refused_in_one_line_as_netcdf_c_cannot_read_it(tmp_path):
    """netCDF has no empty name: netcdf-c 4.10.1 lists it and then cannot read it ("Attribute not found"), so
    our reader refuses the dataset in one line naming the object rather than print CDL that has no spelling."""
    from nczarr_conformance.access.dataset import open_dataset
    from nczarr_conformance.errors import FormatError

    path = _base(tmp_path)
    edit_json(path, "/v/.zattrs", lambda d: d.update({"": 1}))
    netCDF4 = require_module("netCDF4")
    with netCDF4.Dataset(f"file://{path}#mode=nczarr,file") as peer:
        assert "" in peer["v"].ncattrs()
        with pytest.raises(AttributeError, match="Attribute not found"):
            peer["v"].getncattr("")
    why = "/v/.zattrs: an attribute with an empty name: netCDF names are never empty (netcdf-c: NC_EBADNAME)"
    with pytest.raises(FormatError, match=re.escape(why)):
        open_dataset(str(path))
    done = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.dump", str(path)], capture_output=True,
                          text=True, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"nczarr-dump: {path}: {why}\n")


# ---- an array longer than its unlimited dimension (docs/rules.md NCZ-DIM-SIZE: "never longer") ---------------

def _longer_than_unlimited(tmp_path: Path) -> Path:
    """The base store with v (t unlimited, size 2; x 3) grown to 4 records: shape and chunks 2.* and 3.*
    written, the dimension left at 2. netCDF4-python (netcdf-c 4.10.1) refuses it: NC_EDIMSIZE."""
    path = _base(tmp_path)
    edit_json(path, "/v/.zarray", lambda d: d.update(shape=[4, 3]))
    for record in (2, 3):
        for col in (0, 1):
            (path / "v" / f"{record}.{col}").write_bytes(np.array([7, 7], dtype="<i4").tobytes())
    return path


def test_dim_size_fires_on_an_array_longer_than_its_unlimited_dimension(tmp_path):
    path = _longer_than_unlimited(tmp_path)
    assert ("NCZ-DIM-SIZE", "/v/.zarray") in errors(check(str(path)))
    result = run_cli(str(path))
    assert result.returncode == 1 and \
        "error NCZ-DIM-SIZE /v/.zarray: extent 4 along /t but the dimension is 2 (unlimited)" in result.stdout


def test_netcdf_c_refuses_an_array_longer_than_its_unlimited_dimension(tmp_path):
    """The peer's verdict the rule and our reader follow."""
    netCDF4 = require_module("netCDF4")
    with pytest.raises(OSError) as refused:
        netCDF4.Dataset(f"file://{_longer_than_unlimited(tmp_path)}#mode=nczarr,file")
    assert refused.value.errno == -63  # NC_EDIMSIZE: "NetCDF: Invalid dimension size"


def test_our_reader_refuses_an_array_longer_than_its_unlimited_dimension_rather_than_read_part(tmp_path):
    """Not the first 2 records of 4, nor 4 records of a dimension of 2: one line naming the array, exit 2,
    through every way in (the model, the lazy reader, xarray's engine, nczarr-dump)."""
    from nczarr_conformance.access.dataset import open_dataset
    from nczarr_conformance.access.lazy import LazyDataset
    from nczarr_conformance.errors import FormatError

    path = _longer_than_unlimited(tmp_path)
    why = "/v/.zarray: extent 4 along /t, longer than the unlimited dimension's size 2 (NCZ-DIM-SIZE)"
    with pytest.raises(FormatError, match=re.escape(why)):
        open_dataset(str(path))
    with pytest.raises(FormatError, match=re.escape(why)):
        LazyDataset(str(path))
    xr = require_module("xarray")
    with pytest.raises(FormatError, match=re.escape(why)):
        xr.open_dataset(str(path), engine="nczarr")
    dumped = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.dump", str(path)], capture_output=True,
                            text=True, timeout=120, check=False)
    assert (dumped.returncode, dumped.stdout, dumped.stderr) == (2, "", f"nczarr-dump: {path}: {why}\n")


def test_netcdf_c_never_sees_an_unlisted_array(tmp_path):
    """NCZ-GROUP-UNLISTED's reason (docs/rules.md): an array its group's _nczarr_group does not list is not in
    the dataset netCDF4-python (netcdf-c 4.10.1) opens, though its objects are all there."""
    netCDF4 = require_module("netCDF4")
    path = _base(tmp_path)
    edit_json(path, "/.zattrs", lambda d: d["_nczarr_group"]["arrays"].remove("v"))
    assert (path / "v" / ".zarray").exists() and ("NCZ-GROUP-UNLISTED", "/v/.zarray") in errors(check(str(path)))
    with netCDF4.Dataset(f"file://{path}#mode=nczarr,file") as nc:
        assert sorted(nc.variables) == ["s", "sc"]


def test_string_maxstrlen_reads_as_netcdf_c_does(tmp_path):
    """NCZ-STRING-MAXSTRLEN fires exactly where netCDF4-python (netcdf-c 4.10.1) misreads: a |S300 array with no
    _nczarr_maxstrlen reads whole (the dtype's length; the rule is silent), one declaring 128 does not."""
    netCDF4 = require_module("netCDF4")
    long = "x" * 300
    root = Group({"n": Dimension(2)})
    root.variables["s"] = Variable("string", ["/n"], (2,), {}, np.array(["a", long], dtype=object))
    path = tmp_path / "long.file"
    with DirectoryStore(path, "w") as store:
        write_dataset(Dataset(root), store, consolidate=False)
    assert json.loads((path / "s/.zarray").read_text())["dtype"] == "|S300"
    assert "NCZ-STRING-MAXSTRLEN" not in {f.rule for f in check(str(path)).findings}
    with netCDF4.Dataset(f"file://{path}#mode=nczarr,file") as nc:
        assert list(nc["s"][:]) == ["a", long]
    edit_json(path, "/s/.zattrs", lambda d: d.update(_nczarr_maxstrlen=128))
    assert ("NCZ-STRING-MAXSTRLEN", "/s/.zarray") in errors(check(str(path)))
    with netCDF4.Dataset(f"file://{path}#mode=nczarr,file") as nc:
        assert list(nc["s"][:]) != ["a", long]


def test_no_dataset(tmp_path):
    (tmp_path / "empty").mkdir()
    result = run_cli("--format", "json", str(tmp_path / "empty"))
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert doc["flavor"] == "unknown" and doc["findings"][0]["rule"] == "NCZ-LAYOUT-NODATASET"
    assert doc["findings"][0]["key"] is None


def test_zip_with_dotdot_members_is_a_finding_and_nothing_is_extracted(tmp_path):
    base = _base(tmp_path)
    target = tmp_path / "evil.zip"
    with zipfile.ZipFile(target, "w") as zf:
        for p in base.rglob("*"):
            if p.is_file():
                zf.write(p, p.relative_to(base).as_posix())
        zf.writestr("../../escaped.txt", "x")
    report = check(str(target))
    assert ("NCZ-STORE-UNSAFE", None) in errors(report)
    assert not (tmp_path.parent / "escaped.txt").exists() and not (tmp_path / "escaped.txt").exists()


def test_expect_flavor(tmp_path):
    path = _base(tmp_path)
    result = run_cli("--expect", "zarr", str(path))
    assert result.returncode == 1 and "NCZ-LAYOUT-FLAVOR" in result.stdout


def test_a_crashing_rule_is_a_finding(tmp_path, monkeypatch):
    from nczarr_conformance.checker import rules as rules_mod

    def boom(ctx):
        raise RuntimeError("kaboom")
        yield  # pragma: no cover

    boom.__doc__ = "x"
    original = rules_mod.RULES["NCZ-ARRAY-ORDER"]
    monkeypatch.setitem(rules_mod.RULES, "NCZ-ARRAY-ORDER", dataclasses.replace(original, function=boom))
    report = check(str(_base(tmp_path)))
    assert [f.rule for f in report.findings if f.severity == Severity.ERROR] == ["NCZ-CHECK-CRASH"]


def test_giant_declared_shape_is_a_finding_not_an_allocation(tmp_path):
    path = _base(tmp_path)
    edit_json(path, "/v/.zarray", lambda d: d.update(shape=[10**12, 3], chunks=[10**12, 3]))
    edit_json(path, "/.zattrs", lambda d: d["_nczarr_group"]["dimensions"].update(t={"size": 10**12, "unlimited": 1}))
    report = check(str(path), deep=True)
    assert ("NCZ-ARRAY-HUGE", "/v/.zarray") in {(f.rule, f.key) for f in report.findings}



@pytest.mark.parametrize("extra,warned", [(0, False), (1, True)], ids=["exactly-2GiB", "one-element-over"])
def test_a_chunk_over_2_gib_is_warned_and_one_of_exactly_2_gib_is_not(tmp_path, extra, warned):
    """NCZ-ARRAY-HUGE's chunk rule is "more than 2 GiB" (2**31 bytes) per chunk: /v is int (4 bytes), so a chunk of
    2**29 elements is exactly 2 GiB and one more element is over. Declared only: no chunk is written or read."""
    path = _base(tmp_path)
    chunks = [1, 2**29 + extra]
    edit_json(path, "/v/.zarray", lambda d: d.update(chunks=chunks))
    report = check(str(path))
    huge = [f.message for f in report.findings if (f.rule, f.key) == ("NCZ-ARRAY-HUGE", "/v/.zarray")]
    assert huge == ([f"chunks {chunks} declare more than 2 GiB each"] if warned else [])

WARNINGS: dict[str, tuple[str, Callable[[Path], None]]] = {
    "NCZ-JSON-CONTROL": ("/.zattrs", lambda p: (p / ".zattrs").write_bytes(
        (p / ".zattrs").read_bytes().replace(b'"base"', b'"ba\x01se"'))),
    "NCZ-ATTR-UNTYPED": ("/.zattrs", lambda p: edit_json(p, "/.zattrs", lambda d: d["_nczarr_attr"]["types"].pop("n"))),
    "NCZ-ATTR-GHOST": ("/.zattrs", lambda p: edit_json(p, "/.zattrs", lambda d: d.pop("n"))),
    "NCZ-FILL-ATTR": ("/v/.zarray", lambda p: edit_json(p, "/v/.zarray", lambda d: d.update(fill_value=-7))),
    "NCZ-XARRAY-DIMS": ("/v/.zattrs", lambda p: edit_json(p, "/v/.zattrs", lambda d: d.update(
        _ARRAY_DIMENSIONS=["a", "b"]))),
    "NCZ-STORE-STRAY": ("/v/.zattrs~", lambda p: (p / "v/.zattrs~").write_text("{}")),
    "NCZ-CHUNK-MISSING": ("/v/.zarray", lambda p: (p / "v/1.1").unlink()),
}


@pytest.mark.parametrize("rule_id", sorted(WARNINGS))
def test_warnings_and_infos_do_not_fail(rule_id, tmp_path):
    path = _base(tmp_path)
    key, change = WARNINGS[rule_id]
    change(path)
    report = check(str(path), deep=True)
    assert report.exit_code == 0, report.to_text()
    assert (rule_id, key) in {(f.rule, f.key) for f in report.findings}
