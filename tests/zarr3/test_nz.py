"""NZ-1.0 (zarr-conventions/nz; issue #25 (c)): detect and read, check (NCZ-NZ-*), write ``--flavor nz``.

Expected values come from outside the code under test: the source's values and attributes from
netCDF4-python, the schema verdicts from NZ's own validator (their validate.js on ajv 8.17.1, copied
unchanged into tests/zarr3/nz_peer/ with its licence), the values read back from zarr-python 3.1.6 and
xarray, and the metadata expectations from the NZ-1.0 README (quoted where used).
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nczarr_conformance.cli import check, dump
from tests.conftest import REPO, missing_peer, require_module
from tests.in_process import run_main
from tests.peers.known import PeerStillWrong, still_wrong
from tests.test_convert_valid import run_cli

netCDF4 = require_module("netCDF4")
zarr = require_module("zarr")
xr = require_module("xarray")

PEER = REPO / "tests" / "zarr3" / "nz_peer"
#: runs PEER's validate.js once per document in one Node.js process (the theirs fixture)
EACH = REPO / "tests" / "zarr3" / "nz_validate_each.mjs"
SCHEMA = REPO / "nczarr_conformance" / "schema" / "nz-1.0.schema.json"
AJV_DIR = Path(os.environ.get("NCZ_AJV_DIR", Path.home() / ".cache" / "nczarr-ajv"))
#: the README's "Convention Registration" entry, as it prints it
REGISTRATION = {
    "schema_url": "https://raw.githubusercontent.com/zarr-conventions/nz/refs/tags/v1/schema.json",
    "spec_url": "https://github.com/zarr-conventions/nz/blob/v1/README.md",
    "uuid": "d0a980b5-c644-4dcc-85a1-283799a58f40",
    "name": "NZ-1.0",
    "description": "Structural interoperability layer for scientific array conventions on Zarr v3",
}
ROWS = np.arange(10, dtype="f4").reshape(2, 5)


def cli(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", f"nczarr_conformance.cli.{module}", *args], capture_output=True,
                          text=True, timeout=120, env=env)


# ---- their validator ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def their_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory laid out as NZ's repository runs validate.js: the script, ``{"type": "module"}``, ajv."""
    if shutil.which("node") is None:
        missing_peer("node not on PATH (NZ's validate.js runs on Node.js)")
    if not (AJV_DIR / "node_modules" / "ajv" / "package.json").is_file():
        missing_peer(f"ajv not installed in {AJV_DIR} (scripts/test installs ajv 8.17.1 there; NCZ_AJV_DIR)")
    here = tmp_path_factory.mktemp("nz-peer")
    shutil.copy(PEER / "validate.js", here / "validate.js")
    shutil.copy(EACH, here / EACH.name)
    (here / "package.json").write_text('{"type": "module"}')  # their package.json says so too
    (here / "node_modules").symlink_to(AJV_DIR / "node_modules")
    return here


def their_exit_code(here: Path, data: Path) -> int:
    """``node validate.js schema.json data.json`` as their test.js runs it: its exit code."""
    done = subprocess.run([shutil.which("node") or "node", "validate.js", str(SCHEMA), str(data)], cwd=here,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode


@pytest.fixture(scope="module")
def theirs(their_dir: Path) -> Iterator[Callable[[Any], bool]]:
    """NZ's validate.js on each document: True when valid. All of them run in one Node.js process
    (nz_validate_each.mjs: validate.js imported afresh per document, its exit code the verdict)."""
    node = subprocess.Popen([shutil.which("node") or "node", EACH.name, str(SCHEMA)], cwd=their_dir,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert node.stdin is not None and node.stdout is not None
    counter = iter(range(10**6))

    def validate(doc: Any) -> bool:
        data = their_dir / f"doc{next(counter)}.json"
        data.write_text(json.dumps(doc))
        node.stdin.write(f"{data}\n")
        node.stdin.flush()
        line = node.stdout.readline()
        assert line, f"node ended: {node.wait()}, {node.stderr.read() if node.stderr else ''}"
        code = json.loads(line)["code"]
        assert code in (0, 1), code
        return bool(code == 0)

    yield validate
    node.stdin.close()
    assert node.wait(timeout=60) == 0


def test_the_validator_run_alone_agrees_with_the_run_in_one_process(their_dir: Path, written: Path,
                                                                      theirs: Callable[[Any], bool]) -> None:
    """The ``theirs`` fixture's verdicts are validate.js's own exit codes, run as their test.js runs it: a valid
    example, a document we write, and each broken the two ways their schema words differently."""
    docs = [json.loads((PEER / "examples" / "array_basic.json").read_text()), documents(written)["f"]]
    docs += [_break(docs[1], "null dimension name"), _break(documents(written)["."], "no zarr_conventions")]
    for i, doc in enumerate(docs):
        alone = their_dir / f"alone{i}.json"
        alone.write_text(json.dumps(doc))
        assert theirs(doc) is (their_exit_code(their_dir, alone) == 0) is (i < 2), i


def ours(doc: Any) -> bool:
    from nczarr_conformance.zarr3 import nz

    return nz.schema_errors(doc) == []


# ---- a source and its NZ store -----------------------------------------------------------------------------------
def make_source(path: Path) -> Path:
    """CF-style global attributes, attribute types JSON alone would not keep, fills, a scalar, a sub-group."""
    with netCDF4.Dataset(path, "w") as nc:
        nc.Conventions = "CF-1.8"
        nc.title = "nz"
        nc.factor16 = np.int16(7)
        nc.big = np.int64(2**40)
        nc.ratio = np.float32(0.5)
        nc.createDimension("t", 2)
        nc.createDimension("x", 5)
        f = nc.createVariable("f", "f4", ("t", "x"), fill_value=-9999.0)
        f[:] = ROWS
        f[1, 4] = -9999.0
        f.units = "m"
        f.valid = np.int32(3)
        nc.createVariable("x", "f8", ("x",))[:] = np.arange(5) * 0.5
        s = nc.createVariable("s", "i2", ())
        s.assignValue(4)
        n = nc.createVariable("n", "f8", ("x",), fill_value=np.nan)
        n[:3] = [1, 2, 3]
        g = nc.createGroup("g")
        g.createDimension("y", 2)
        v = g.createVariable("v", "i4", ("y",), fill_value=-1)
        v[:] = [1, -1]
    return path


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_source(tmp_path_factory.mktemp("nz-src") / "src.nc")


def convert(source: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    done = run_cli("--zarr-format", "3", "--flavor", "nz", *extra, str(source), str(out))
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture(scope="module")
def written(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """nc2nczarr's NZ store of the source, written once: tests that change it change a copy."""
    out = tmp_path_factory.mktemp("nz-out") / "o.zarr"
    convert(source, out)
    return out


@pytest.fixture(scope="module")
def written_zip(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("nz-zip") / "o.zip"
    convert(source, out)
    return out


@pytest.fixture(scope="module")
def unconsolidated(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The NZ store without consolidated metadata (an edited zarr.json is then all a reader sees): copy it to edit."""
    out = tmp_path_factory.mktemp("nz-unconsolidated") / "o.zarr"
    convert(source, out, "--no-consolidate")
    return out


def documents(store: Path) -> dict[str, Any]:
    return {str(p.relative_to(store).parent): json.loads(p.read_text()) for p in sorted(store.rglob("zarr.json"))}


# ---- 3. the peer: our schema verdict equals theirs -------------------------------------------------------------
@pytest.mark.parametrize("example", sorted(p.name for p in (PEER / "examples").glob("*.json")))
def test_their_examples_are_valid_for_both(example: str, theirs: Callable[[Any], bool]) -> None:
    doc = json.loads((PEER / "examples" / example).read_text())
    assert theirs(doc) is True
    assert ours(doc) is True


def test_every_zarr_json_we_write_is_valid_for_both(written: Path, theirs: Callable[[Any], bool]) -> None:
    docs = documents(written)
    assert set(docs) == {".", "f", "x", "s", "n", "g", "g/v"}
    for where, doc in docs.items():
        assert theirs(doc) is True, where
        assert ours(doc) is True, where
        for entry in (doc.get("consolidated_metadata") or {}).get("metadata", {}).values():
            assert theirs(entry) is True and ours(entry) is True


def _break(doc: dict[str, Any], how: str) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    attrs = out["attributes"]
    if how == "no zarr_conventions":
        del attrs["zarr_conventions"]
    elif how == "foreign registration":
        attrs["zarr_conventions"] = [{"uuid": "00000000-0000-0000-0000-000000000000", "name": "other"}]
    elif how == "registration with an unknown member":
        attrs["zarr_conventions"] = [dict(REGISTRATION, version="1")]
    elif how == "no attributes":
        del out["attributes"]
    elif how == "zarr_format 2":
        out["zarr_format"] = 2
    elif how == "no conventions":
        attrs.pop("conventions", None)
    elif how == "conventions without NZ":
        attrs["conventions"] = "CF-1.8"
    elif how == "null dimension name":
        out["dimension_names"][0] = None
    elif how == "empty dimension name":
        out["dimension_names"][0] = ""
    elif how == "no dimension_names":
        del out["dimension_names"]
    elif how == "negative shape":
        out["shape"][0] = -1
    return out


GROUP_BREAKS = ["no zarr_conventions", "foreign registration", "registration with an unknown member",
                "no attributes", "zarr_format 2", "no conventions", "conventions without NZ"]
ARRAY_BREAKS = ["no zarr_conventions", "null dimension name", "empty dimension name", "no dimension_names",
                "negative shape"]


@pytest.mark.parametrize(("node", "how"), [(".", h) for h in GROUP_BREAKS] + [("f", h) for h in ARRAY_BREAKS])
def test_invalid_documents_are_invalid_for_both(written: Path, theirs: Callable[[Any], bool], node: str,
                                                how: str) -> None:
    doc = _break(documents(written)[node], how)
    assert theirs(doc) is False
    assert ours(doc) is False


# ---- 1. detect and read ---------------------------------------------------------------------------------------
def test_dump_k_says_nz(written: Path) -> None:
    done = cli("dump", "-K", str(written))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "zarr nz\n"


def test_root_declares_nz_first_with_cf_merged(written: Path) -> None:
    """README, Convention Declaration: ``"conventions": "NZ-1.0 CF-1.12"``, "ordered from most general to most
    specific"; the NUG's ``Conventions`` maps to ``conventions``, so it is not written twice."""
    root = documents(written)["."]["attributes"]
    assert root["conventions"] == "NZ-1.0 CF-1.8"
    assert "Conventions" not in root
    assert root["zarr_conventions"] == [REGISTRATION]
    assert documents(written)["s"]["dimension_names"] == []


def _source_model(path: Path) -> dict[str, Any]:
    """{variable path: (dims, values, {attr: (numpy dtype kind+size or 'str', value)})} from netCDF4-python."""
    out: dict[str, Any] = {}

    def attrs(obj: Any) -> dict[str, Any]:
        return {k: _typed(obj.getncattr(k)) for k in obj.ncattrs()}

    with netCDF4.Dataset(path) as nc:
        nc.set_auto_mask(False)
        for group in (nc, nc["g"]):
            prefix = "" if group is nc else "g/"
            out[prefix or "/"] = attrs(group)
            for name, var in group.variables.items():
                out[prefix + name] = (list(var.dimensions), np.array(var[...]), attrs(var))
    return out


def _typed(value: Any) -> tuple[str, Any]:
    if isinstance(value, str):
        return ("str", value)
    arr = np.asarray(value)
    return (arr.dtype.str[1:], [v if v == v else "NaN" for v in arr.ravel().tolist()])  # NaN compares by name


def _our_model(url: str) -> dict[str, Any]:
    from nczarr_conformance.stores import open_store
    from nczarr_conformance.urls import parse
    from nczarr_conformance.zarr3.reader import read_any

    with open_store(parse(url)) as store:
        ds = read_any(store)
    out: dict[str, Any] = {}

    def attrs(attributes: dict[str, Any]) -> dict[str, Any]:
        return {k: ("str", a.value) if isinstance(a.value, str) else _typed(a.value) for k, a in attributes.items()}

    for gkey, group in ds.root.walk():
        prefix = gkey.strip("/") + "/" if gkey != "/" else ""
        out[prefix or "/"] = attrs(group.attributes)
        for name, var in group.variables.items():
            out[prefix + name] = ([d.rsplit("/", 1)[-1] for d in var.dimensions], np.asarray(var.data),
                                  attrs(var.attributes))
    return out


def _same(expected: dict[str, Any], got: dict[str, Any]) -> None:
    assert sorted(got) == sorted(expected)
    for key, want in expected.items():
        if isinstance(want, dict):
            assert got[key] == want, key
            continue
        dims, values, attributes = got[key]
        assert dims == want[0], key
        np.testing.assert_array_equal(values, want[1], err_msg=key)
        assert values.dtype == want[1].dtype, key
        assert attributes == want[2], key


@pytest.mark.parametrize("kind", ["dir", "zip"])
def test_read_back_equal_through_our_reader(source: Path, written: Path, written_zip: Path, kind: str) -> None:
    """Values, dimensions, attributes and their netCDF types as netCDF4-python reads the source: NZ's
    bookkeeping hidden, ``Conventions`` shown again, ``_nczarr_attr`` types giving back int16/float32/int32."""
    out = written_zip if kind == "zip" else written
    _same(_source_model(source), _our_model(str(out)))


@pytest.mark.parametrize("kind", ["dir", "zip"])
def test_read_back_equal_through_zarr_python_and_xarray(source: Path, written: Path, written_zip: Path,
                                                         kind: str) -> None:
    """zarr-python: values, dimension_names and attributes (NZ's own ones added); xarray: values and dims.
    xarray 2026.9 refuses NZ's plain-number float ``_FillValue`` (``FillValueCoder.decode``: "expected str or
    bytes"), even when ``open_zarr`` is told ``use_zarr_fill_value_as_mask=True``; a ``ZarrStore`` opened
    with it masks with the storage ``fill_value``, which the NZ writer sets to the same value."""
    out = written_zip if kind == "zip" else written
    expected = _source_model(source)
    store: Any = zarr.storage.ZipStore(str(out), mode="r") if kind == "zip" else str(out)
    root = zarr.open_group(store, mode="r", zarr_format=3)
    for key, want in expected.items():
        if isinstance(want, dict):
            continue
        arr = root[key]
        np.testing.assert_array_equal(arr[...], want[1], err_msg=key)
        assert list(arr.metadata.dimension_names or []) == want[0], key
        stored = dict(arr.attrs)
        assert stored.pop("zarr_conventions") == [REGISTRATION]
        stored.pop("_nczarr_attr", None)
        assert sorted(stored) == sorted(want[2]), key
        if "_FillValue" in want[2]:  # a JSON value of the data type: a number, or "NaN" as v3 spells it
            assert stored["_FillValue"] == want[2]["_FillValue"][1][0], key
    assert root.attrs["conventions"] == "NZ-1.0 CF-1.8"
    # open_zarr drops use_zarr_fill_value_as_mask on its way to the backend (ZarrBackendEntrypoint.open_dataset
    # passes None, which for v3 means False); a ZarrStore opened with it is read as it says
    zstore = xr.backends.zarr.ZarrStore.open_group(store, mode="r", zarr_format=3, consolidated=True,
                                                   use_zarr_fill_value_as_mask=True)
    ds = xr.open_dataset(zstore)
    with netCDF4.Dataset(source) as nc:
        for name in ("f", "x", "s", "n"):
            np.testing.assert_array_equal(ds[name].values, np.ma.filled(nc[name][...].astype("f8"), np.nan))
            assert list(ds[name].dims) == list(nc[name].dimensions)
    if kind == "zip":
        store.close()


def test_api_write_flavor_nz(tmp_path: Path) -> None:
    """``write(..., zarr_format=3, flavor="nz")`` writes the same layout as nc2nczarr."""
    import nczarr_conformance as ncz
    from nczarr_conformance.testing.samples import small_model

    out = tmp_path / "o.zarr"
    model = small_model()
    del model.root.variables["c"]  # char: refused (test_char_and_mixed_float_attributes_are_refused_by_name)
    with pytest.warns(UserWarning) as said:
        ncz.write(model, str(out), zarr_format=3, flavor="nz")
    lines = [str(w.message) for w in said]
    assert "unlimited dimensions" in lines[0]
    assert "outside its core set" in lines[1]  # the model's string variable
    root = json.loads((out / "zarr.json").read_text())
    assert root["attributes"]["conventions"].split()[0] == "NZ-1.0"
    assert run_main(dump.main, ["-K", str(out)]).stdout == "zarr nz\n"


# ---- 4. what NZ cannot hold --------------------------------------------------------------------------------------
def test_an_ancestor_dimension_clashing_in_a_group_is_refused(tmp_path: Path) -> None:
    """/g/a uses /g/x (2), /g/b the root's /x (3): in NZ both are label x of group g, two lengths."""
    import nczarr_conformance as ncz
    from nczarr_conformance.errors import UnsupportedError
    from nczarr_conformance.model import Dataset, Dimension, Group, Variable

    root = Group()
    root.dimensions = {"x": Dimension(3)}
    sub = Group()
    sub.dimensions = {"x": Dimension(2)}
    sub.variables = {"a": Variable("int", ["/g/x"], (2,), {}, np.array([1, 2], dtype="i4")),
                     "b": Variable("int", ["/x"], (3,), {}, np.array([1, 2, 3], dtype="i4"))}
    root.groups = {"g": sub}
    with pytest.raises(UnsupportedError, match="shared dimension constraint") as caught:
        ncz.write(Dataset(root), str(tmp_path / "o.zarr"), zarr_format=3, flavor="nz")
    assert "\n" not in str(caught.value) and "/g/b" in str(caught.value)
    assert not (tmp_path / "o.zarr" / "zarr.json").exists()


def test_notes_name_what_nz_does_not_keep(tmp_path: Path) -> None:
    src = tmp_path / "notes.nc"
    with netCDF4.Dataset(src, "w") as nc:
        nc.createDimension("t", None)
        v = nc.createVariable("c", str, ("t",))
        v[0] = "a"
        v.label = np.array(["text"], dtype=object)[0]
        nc.setncattr_string("s", "a string")
    done = run_cli("--zarr-format", "3", "--flavor", "nz", str(src), str(tmp_path / "o.zarr"))
    assert done.returncode == 0, done.stderr
    assert "unlimited dimensions (written at their current length): /t" in done.stderr
    assert "/:s (string)" in done.stderr
    assert "outside its core set" in done.stderr and "/c" in done.stderr


# ---- 2. the rules: each broken once, kept by what we write ----------------------------------------------------
def _check(store: Path) -> dict[str, Any]:
    """nczarr-check --format json's report, its main(argv) run in this process (tests/in_process.py)."""
    done = run_main(check.main, ["--format", "json", str(store)])
    assert done.returncode in (0, 1), done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def _check_cli(*stores: Path) -> list[dict[str, Any]]:
    """The command itself, ``nczarr-check --format json STORE...`` in one run: a report per store, in order."""
    done = cli("check", "--format", "json", *map(str, stores))
    assert done.returncode in (0, 1), done.stderr
    reports = json.loads(done.stdout)
    reports = reports if len(stores) > 1 else [reports]
    assert [r["url"] for r in reports] == list(map(str, stores))
    return reports


def test_what_we_write_keeps_every_nz_rule(written: Path) -> None:
    [report] = _check_cli(written)
    assert report["flavor"] == "nz"
    assert [f for f in report["findings"] if f["rule"].startswith("NCZ-NZ-")] == []


def _edit(store: Path, node: str, change: Callable[[dict[str, Any]], None]) -> None:
    path = store / node / "zarr.json" if node != "." else store / "zarr.json"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def _set_attr(name: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc["attributes"].__setitem__(name, value)


def _del_attr(name: str) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc["attributes"].pop(name)


BREAKS: dict[str, tuple[str, str, Callable[[dict[str, Any]], None]]] = {
    "NCZ-NZ-CONVENTIONS": ("error", ".", _del_attr("conventions")),
    "NCZ-NZ-SCHEMA": ("error", "f", _del_attr("zarr_conventions")),
    "NCZ-NZ-DIMENSION-NAMES": ("error", "f", lambda d: d["dimension_names"].__setitem__(1, None)),
    "NCZ-NZ-SHARED-DIMENSIONS": ("error", "n", lambda d: d.update(shape=[4], dimension_names=["x"])),
    "NCZ-NZ-FILLVALUE": ("error", "f", _set_attr("_FillValue", "AAAAAIBnw8A=")),  # xarray's base64 of -9999.0
    "NCZ-NZ-RESERVED": ("error", "g", _set_attr("_FillValue", 1)),
    "NCZ-NZ-NAMES": ("error", "f", _set_attr("a/b", 1)),
    "NCZ-NZ-ATTRIBUTE-VALUES": ("error", "f", _set_attr("mixed", [1, "a"])),
    "NCZ-NZ-DATA-TYPES": ("warning", "x", lambda d: d.update(data_type="string",
                                                              codecs=[{"name": "vlen-utf8"}], fill_value="")),
}


@pytest.fixture(scope="module")
def break_reports(unconsolidated: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each of BREAKS made in its own copy of the unconsolidated store; nczarr-check run once over the store as
    written (report "") and every copy (report by rule)."""
    here = tmp_path_factory.mktemp("nz-breaks")
    stores = {"": unconsolidated}
    for rule_id, (_, node, change) in BREAKS.items():
        stores[rule_id] = here / rule_id / "o.zarr"
        shutil.copytree(unconsolidated, stores[rule_id])
        _edit(stores[rule_id], node, change)
    return dict(zip(stores, _check_cli(*stores.values()), strict=True))


@pytest.mark.parametrize("rule_id", sorted(BREAKS))
def test_each_rule_reports_its_break(break_reports: dict[str, dict[str, Any]], rule_id: str) -> None:
    """The store as written has no finding of the rule; with the rule's break (the break_reports fixture) the rule
    reports it, at its severity, on the zarr.json broken."""
    severity, _, _ = BREAKS[rule_id]
    before = [f for f in break_reports[""]["findings"] if f["rule"] == rule_id]
    assert before == []
    found = [f for f in break_reports[rule_id]["findings"] if f["rule"] == rule_id]
    assert found and {f["severity"] for f in found} == {severity}, found
    assert all(f["key"].endswith("zarr.json") for f in found)


def test_consolidated_rule_reports_a_stale_entry(written: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.zarr"
    shutil.copytree(written, out)
    _edit(out, "f", _set_attr("units", "km"))
    found = [f for f in _check(out)["findings"] if f["rule"] == "NCZ-NZ-CONSOLIDATED"]
    assert len(found) == 1 and "stale" in found[0]["message"]


def test_naming_shoulds_are_warnings(unconsolidated: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.zarr"
    shutil.copytree(unconsolidated, out)
    _edit(out, "f", _set_attr("9lives", 1))
    _edit(out, "f", _set_attr("Units", "m"))
    found = [f for f in _check(out)["findings"] if f["rule"] == "NCZ-NZ-NAMES"]
    assert {f["severity"] for f in found} == {"warning"}
    assert len(found) == 2


def test_conventions_in_capital_c_only_is_a_warning_and_registration_alone_an_error(unconsolidated: Path,
                                                                                      tmp_path: Path) -> None:
    out = tmp_path / "o.zarr"
    shutil.copytree(unconsolidated, out)
    _edit(out, ".", lambda d: d["attributes"].update(Conventions=d["attributes"].pop("conventions")))
    found = [f for f in _check(out)["findings"] if f["rule"] == "NCZ-NZ-CONVENTIONS"]
    assert [f["severity"] for f in found] == ["warning"]
    _edit(out, ".", _del_attr("Conventions"))
    report = _check(out)
    assert report["flavor"] == "nz"  # registered: it claims NZ, and is told what is missing
    assert [f["severity"] for f in report["findings"] if f["rule"] == "NCZ-NZ-CONVENTIONS"] == ["error"]


def test_a_plain_v3_store_is_not_nz(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.zarr"
    done = run_cli("--zarr-format", "3", str(source), str(out))
    assert done.returncode == 0, done.stderr
    report = _check(out)
    assert report["flavor"] == "zarr-v3"
    assert [f for f in report["findings"] if f["rule"].startswith("NCZ-NZ-")] == []
    assert run_main(dump.main, ["-K", str(out)]).stdout == "zarr zarr-v3\n"


def make_cf_source(path: Path, *, station_names: bool = False) -> Path:
    """A plain CF-like file: coordinates, a float field without a _FillValue attribute, an int count with one,
    a scalar grid mapping; ``station_names``: a CF char variable (station_name(station, nchar))."""
    with netCDF4.Dataset(path, "w") as nc:
        nc.Conventions = "CF-1.8"
        nc.title = "cf"
        nc.createDimension("time", 2)
        nc.createDimension("lat", 3)
        nc.createDimension("lon", 4)
        time = nc.createVariable("time", "f8", ("time",))
        time.units, time.calendar, time[:] = "days since 2000-01-01", "standard", [0.0, 1.0]
        lat = nc.createVariable("lat", "f4", ("lat",))
        lat.units, lat[:] = "degrees_north", [-10.0, 0.0, 10.0]
        lon = nc.createVariable("lon", "f4", ("lon",))
        lon.units, lon[:] = "degrees_east", [0.0, 90.0, 180.0, 270.0]
        tas = nc.createVariable("tas", "f4", ("time", "lat", "lon"), zlib=True, shuffle=True)
        tas.units, tas.standard_name, tas.grid_mapping = "K", "air_temperature", "crs"
        tas[:] = np.arange(24, dtype="f4").reshape(2, 3, 4) + 250
        count = nc.createVariable("count", "i4", ("time", "lat"), fill_value=-1)
        count[:] = [[1, 2, 3], [4, -1, 6]]
        crs = nc.createVariable("crs", "i4", ())
        crs.grid_mapping_name = "latitude_longitude"
        if station_names:
            nc.createDimension("station", 2)
            nc.createDimension("nchar", 8)
            name = nc.createVariable("station_name", "S1", ("station", "nchar"))
            name.cf_role = "timeseries_id"
            name[:] = netCDF4.stringtochar(np.array(["alpha", "beta"], dtype="S8"))
    return path


def test_char_and_mixed_float_attributes_are_refused_by_name(tmp_path: Path, theirs: Callable[[Any], bool]) -> None:
    """corpus/rich.nc (char data, a float attribute holding NaN among numbers) and a CF file with a station_name
    char variable: exit 2, one line naming each object, nothing written. Why: NZ's own validator refuses the
    only v3 form of char (zarr-python's null_terminated_bytes object, as --flavor zarr writes it)."""
    cases = {REPO / "corpus" / "rich.nc": ["/chars (char", "/:f32 (a float attribute holding NaN"],
             make_cf_source(tmp_path / "cf.nc", station_names=True): ["/station_name (char"]}
    for src, named in cases.items():
        out = tmp_path / f"{src.stem}.zarr"
        done = run_cli("--zarr-format", "3", "--flavor", "nz", str(src), str(out))
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert all(n in done.stderr for n in named) and "Traceback" not in done.stderr, done.stderr
        assert not out.exists()
    pure = tmp_path / "pure.zarr"
    assert run_cli("--zarr-format", "3", "--flavor", "zarr", "-q", str(tmp_path / "cf.nc"), str(pure)).returncode == 0
    doc = json.loads((pure / "station_name" / "zarr.json").read_text())
    assert isinstance(doc["data_type"], dict)  # {"name": "null_terminated_bytes", ...}
    doc["attributes"]["zarr_conventions"] = [REGISTRATION]
    assert not theirs(doc)  # NZ-1.0's validator: data_type must be a name


def test_a_cf_file_passes_nz_and_our_check_and_opens_in_xarray_equal(tmp_path: Path,
                                                                    theirs: Callable[[Any], bool]) -> None:
    """A plain CF-like file: every zarr.json valid for NZ's validator, no NZ error from nczarr-check, and xarray's
    open_zarr and open_dataset(engine="zarr") read each variable as netCDF4-python reads the source (its
    _FillValue as NaN), with its dimensions."""
    src = make_cf_source(tmp_path / "cf.nc")
    out = tmp_path / "cf.zarr"
    convert(src, out)
    for node, doc in documents(out).items():
        assert theirs(doc) and ours(doc), node
    assert [f for f in _check(out)["findings"] if f["rule"].startswith("NCZ-NZ-") and f["severity"] == "error"] == []
    with netCDF4.Dataset(src) as nc:
        nc.set_auto_mask(False)  # masked by _FillValue below, as xarray does (not by netCDF's default fill)
        for ds in (xr.open_zarr(str(out), zarr_format=3, decode_times=False),
                   xr.open_dataset(str(out), engine="zarr", decode_times=False)):
            for name, var in nc.variables.items():
                want = np.asarray(var[...]).astype("f8")
                if "_FillValue" in var.ncattrs():
                    want[want == var.getncattr("_FillValue")] = np.nan
                np.testing.assert_array_equal(ds[name].values.astype("f8"), want, err_msg=name)
                assert ds[name].dims == var.dimensions, name
            assert ds.attrs["conventions"] == "NZ-1.0 CF-1.8"


@pytest.fixture(scope="module")
def float_fill_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The CF file with a float field holding a -9999.0 _FillValue, and its NZ store (read, never changed)."""
    tmp_path = tmp_path_factory.mktemp("nz-float-fill")
    src = make_cf_source(tmp_path / "cf.nc")
    with netCDF4.Dataset(src, "a") as nc:
        pr = nc.createVariable("pr", "f4", ("time", "lat"), fill_value=-9999.0)
        pr[:] = [[1, 2, 3], [4, 5, -9999.0]]
    out = tmp_path / "cf.zarr"
    convert(src, out)
    return src, out


def test_a_float_fill_value_is_written_as_nz_types_it(float_fill_store: tuple[Path, Path],
                                                     theirs: Callable[[Any], bool]) -> None:
    """NZ-1.0: "The type of _FillValue is the array's data_type": -9999.0, valid for NZ's validator and
    nczarr-check, read back through our reader as netCDF4-python reads the source (the precondition of
    test_known_deviation_xarray_refuses_nz_float_fill_value)."""
    src, out = float_fill_store
    pr = documents(out)["pr"]
    assert pr["attributes"]["_FillValue"] == -9999.0 and pr["fill_value"] == -9999.0 and theirs(pr) and ours(pr)
    assert [f for f in _check(out)["findings"] if f["rule"].startswith("NCZ-NZ-") and f["severity"] == "error"] == []
    got = _our_model(str(out))["pr"]
    with netCDF4.Dataset(src) as nc:
        nc.set_auto_mask(False)
        np.testing.assert_array_equal(got[1], nc["pr"][...])
        assert got[2]["_FillValue"] == _typed(nc["pr"].getncattr("_FillValue"))


@pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason="xarray 2026.9 decodes a float _FillValue only as its "
                                                               "own base64 spelling, not as NZ-1.0 types it")
def test_known_deviation_xarray_refuses_nz_float_fill_value(float_fill_store: tuple[Path, Path]) -> None:
    """open_zarr (with use_zarr_fill_value_as_mask=True too: open_zarr drops it on its way to the backend) and
    open_dataset(engine="zarr") both stop at FillValueCoder.decode."""
    src, out = float_fill_store
    with netCDF4.Dataset(src) as nc:
        right = np.ma.filled(nc["pr"][...].astype("f8"), np.nan).tolist()
    seen = []
    for opener in (lambda: xr.open_zarr(str(out), zarr_format=3, use_zarr_fill_value_as_mask=True),
                   lambda: xr.open_dataset(str(out), engine="zarr")):
        try:
            seen.append(opener()["pr"].values.astype("f8").tolist())
        except TypeError as exc:
            seen.append(str(exc))
    wrong = "Failed to decode fill_value: expected str or bytes for dtype float32, got float"
    still_wrong(seen, wrong=[wrong, wrong], right=[right, right])


# ---- nczarr-fix --to-v3 --flavor nz ------------------------------------------------------------------------------
def test_fix_to_v3_flavor_nz_keeps_every_chunk_and_reads_as_the_source(source: Path, tmp_path: Path,
                                                                        theirs: Callable[[Any], bool]) -> None:
    """An NCZarr v2 store (nc2nczarr's default layout) migrated in NZ-1.0's layout: every chunk object
    under its key, byte for byte; every zarr.json valid for NZ's own validator and for ours; read back
    as netCDF4-python reads the source (attribute types through ``_nczarr_attr``); the checker finds no
    NZ rule broken. (Before: refused in one line, "--flavor nz is not written by --to-v3 yet".)"""
    v2, out = tmp_path / "v2.zarr", tmp_path / "v3.zarr"
    assert run_cli(str(source), str(v2)).returncode == 0

    def chunk_files(store: Path) -> dict[str, bytes]:
        return {str(p.relative_to(store)): p.read_bytes() for p in store.rglob("*")
                if p.is_file() and not p.name.startswith(".") and p.name != "zarr.json"}

    kept = chunk_files(v2)
    assert kept
    done = cli("fix", str(v2), "--to-v3", "--flavor", "nz", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert chunk_files(out) == kept
    docs = documents(out)
    assert sorted(docs) == [".", "f", "g", "g/v", "n", "s", "x"]
    for node, doc in docs.items():
        assert theirs(doc) and ours(doc), node
    assert docs["."]["attributes"]["zarr_conventions"] == [REGISTRATION]
    assert docs["f"]["chunk_key_encoding"]["name"] == "v2"  # the keys the chunks already have
    _same(_source_model(source), _our_model(str(out)))
    report = _check(out)
    assert report["flavor"] == "nz"
    assert [f for f in report["findings"] if f["rule"].startswith("NCZ-NZ") and f["severity"] == "error"] == []
