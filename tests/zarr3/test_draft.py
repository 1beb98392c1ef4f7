"""netcdf-c's DRAFT NCZarr v3 layout (netcdf-c PR #3068, unmerged): read, detect, check.

Stores are synthesised as zformat3.c writes them (tests/zarr3/draft_fixtures.py). Expected values come
from netCDF4-python: the same data written to a netCDF file, converted by ``nc2nczarr`` to v2 NCZarr,
must read to the same model as the draft store.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest

from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.errors import FormatError
from nczarr_conformance.stores import open_store
from nczarr_conformance.zarr3.draft import DRAFT_FLAVOR, DraftReader, open_v3
from tests.check.test_check_cli import assert_one_line_failure, run
from tests.zarr3.draft_fixtures import DGroup, sample, write_store


def write_nc(path: Path, tree: DGroup) -> Path:
    """``tree`` as a netCDF-4 file written by netCDF4-python (the peer the draft store must read like)."""
    with netCDF4.Dataset(path, "w") as nc:
        _fill_nc(nc, tree)
    return path


def _fill_nc(grp: Any, tree: DGroup) -> None:
    nptype = {"byte": "i1", "ubyte": "u1", "short": "i2", "ushort": "u2", "int": "i4", "uint": "u4",
              "int64": "i8", "uint64": "u8", "float": "f4", "double": "f8", "char": "S1", "string": str}
    for name, (size, unlim) in tree.dims.items():
        grp.createDimension(name, None if unlim else size)
    for name, (nctype, value) in tree.attrs.items():
        _set_attr(grp, name, nctype, value)
    for name, child in tree.groups.items():
        _fill_nc(grp.createGroup(name), child)  # subgroups first: their dimensions may be used below
    for name, var in tree.vars.items():
        fill = var.attrs.get("_FillValue")
        v = grp.createVariable(name, nptype[var.type], [d.rsplit("/", 1)[-1] for d in var.dims],
                               fill_value=None if fill is None else np.asarray(fill[1])[0])
        for aname, (nctype, value) in var.attrs.items():
            if aname != "_FillValue":
                _set_attr(v, aname, nctype, value)
        if var.type == "string":
            v[:] = np.array(var.values, dtype=object)
        elif var.dims:
            v[:] = var.values
        else:
            v.assignValue(var.values)


def _set_attr(obj: Any, name: str, nctype: str, value: Any) -> None:
    if nctype == "string":
        obj.setncattr_string(name, value)
    elif nctype == "char":
        obj.setncattr(name, value)
    else:
        obj.setncattr(name, np.asarray(value))


def _cli(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", f"nczarr_conformance.cli.{tool}", *args], capture_output=True,
                          text=True, check=False, timeout=120)


def _model(path: Path) -> dict[str, Any]:
    model: dict[str, Any] = open_dataset(str(path)).to_json(storage=False)
    return model


def _flat_tree() -> DGroup:
    """sample() without the subgroup's cross-group dimension use (netCDF4-python needs /x visible)."""
    return sample()


# ---- read ---------------------------------------------------------------------------------------------------------

def test_draft_reads_equal_to_v2_nczarr_of_the_same_netcdf(tmp_path):
    tree = _flat_tree()
    draft = write_store(tmp_path / "draft.zarr", tree)
    source = write_nc(tmp_path / "same.nc", tree)
    done = _cli("convert", str(source), str(tmp_path / "v2.zarr"))
    assert done.returncode == 0, done.stderr
    v2 = _model(tmp_path / "v2.zarr")
    ours = _model(draft)
    strip = lambda m: json.loads(json.dumps(m, default=str))  # noqa: E731
    assert strip(ours) == strip(v2)


def test_draft_values_equal_netcdf4_python(tmp_path):
    tree = sample()
    draft = write_store(tmp_path / "draft.zarr", tree)
    source = write_nc(tmp_path / "same.nc", tree)
    ds = open_dataset(str(draft))
    with netCDF4.Dataset(source) as nc:
        nc.set_auto_mask(False)
        assert ds.root.variables["label"].data.tolist() == list(nc["label"][:])
        assert np.asarray(ds.root.variables["name"].data, dtype="S1").tobytes() == nc["name"][:].tobytes()
        assert float(ds.root.variables["s"].data) == float(nc["s"][...])
        assert ds.root.groups["g"].variables["w"].data.tolist() == nc["g/w"][:].tolist()
        assert ds.root.dimensions["time"].unlimited and nc.dimensions["time"].isunlimited()
        assert ds.root.variables["v"].attributes["_FillValue"].value.tolist() == [nc["v"]._FillValue]


def test_flavor_is_draft_in_dump_and_check(tmp_path):
    draft = write_store(tmp_path / "draft.zarr", sample())
    kind = _cli("dump", "-K", str(draft))
    assert kind.returncode == 0, kind.stderr
    assert kind.stdout.split()[-1] == DRAFT_FLAVOR
    with open_store(str(draft)) as store:
        assert isinstance(open_v3(store), DraftReader)


@pytest.mark.parametrize("key", ["nczarr_type", "type_alias"])
def test_draft_type_alias_either_key(tmp_path, key):
    draft = write_store(tmp_path / "draft.zarr", sample(), alias_key=key)
    with open_store(str(draft)) as store:
        reader = open_v3(store)
        assert isinstance(reader, DraftReader)
        assert f"type:{key}" in reader.spellings
        assert reader.dataset.root.variables["name"].type == "char"
        assert reader.dataset.root.variables["label"].type == "string"


def test_nczarr_keys_never_user_attributes(tmp_path):
    tree = sample()
    draft = write_store(tmp_path / "draft.zarr", tree)
    ds = open_dataset(str(draft))
    for _, group in ds.root.walk():
        assert not [n for n in group.attributes if n.startswith("_nczarr")]
        for var in group.variables.values():
            assert not [n for n in var.attributes if n.startswith("_nczarr")]


def test_documented_spellings_read_the_same(tmp_path):
    """docs/nczarr.md's list forms of dimensions and attribute_types and 'subgroups' read like the code's."""
    code = _model(write_store(tmp_path / "code.zarr", sample()))

    def documented(path: str, doc: dict[str, Any]) -> None:
        attrs = doc["attributes"]
        group = attrs.get("_nczarr_group")
        if group is not None:
            group["dimensions"] = [{"name": n, **spec} for n, spec in group["dimensions"].items()]
            group["subgroups"] = group.pop("groups")
        types = attrs["_nczarr_attrs"]["attribute_types"]
        attrs["_nczarr_attrs"]["attribute_types"] = [{"name": n, "configuration": {"type": t}}
                                                     for n, t in types.items()]
        if "_nczarr_array" in attrs and "nczarr_type" in attrs["_nczarr_array"]:
            attrs["_nczarr_array"]["type_alias"] = attrs["_nczarr_array"].pop("nczarr_type")
    doc_store = write_store(tmp_path / "doc.zarr", sample(), edit=documented)
    assert _model(doc_store) == code
    with open_store(str(doc_store)) as store:
        reader = open_v3(store)
        assert isinstance(reader, DraftReader)
        assert {"dimensions:list", "attribute_types:list", "subgroups", "type:type_alias"} <= reader.spellings


# ---- hostile draft metadata: one line naming the key, exit 2 as other format errors ----------------------------

def _hostile(tmp_path: Path, edit: Any) -> Path:
    return write_store(tmp_path / "bad.zarr", sample(), edit=edit)


def _missing_dim(path: str, doc: dict[str, Any]) -> None:
    if path == "/v":
        doc["attributes"]["_nczarr_array"]["dimension_references"] = ["/time", "/nosuch"]


def _huge_maxstrlen(path: str, doc: dict[str, Any]) -> None:
    if path == "/label":
        doc["data_type"] = f"r{8 * 10**12}"


def _wrong_rank(path: str, doc: dict[str, Any]) -> None:
    if path == "/v":
        doc["attributes"]["_nczarr_array"]["dimension_references"] = ["/time"]


def _bad_dims(path: str, doc: dict[str, Any]) -> None:
    if path == "/":
        doc["attributes"]["_nczarr_group"]["dimensions"] = {"x": {"size": "three"}}


@pytest.mark.parametrize("edit, line", [
    (_missing_dim, "/v: dimension /nosuch is not defined"),
    (_huge_maxstrlen, "/label/zarr.json: data_type r8000000000000: a maxstrlen of 1000000000000 bytes"),
    (_wrong_rank, "/v/zarr.json: _nczarr_array.dimension_references has 1 names for a 2-d array"),
    (_bad_dims, "/zarr.json: _nczarr_group dimension 'x' has no valid size"),
], ids=["draft-missing-dim", "draft-maxstrlen-1e12", "draft-dimref-rank", "draft-dim-size"])
def test_hostile_draft_metadata_is_one_line(tmp_path, edit, line):
    bad = _hostile(tmp_path, edit)
    with pytest.raises(FormatError, match=line.replace("[", r"\[")), open_store(str(bad)) as store:
        open_v3(store)
    got = assert_one_line_failure(run(str(bad), module="dump"))
    assert line in got


# ---- findings: each documented-vs-coded difference, on a store that triggers it and one that does not ----------

def _findings(path: Path) -> tuple[str, dict[str, list[str]]]:
    from nczarr_conformance.checker import check

    report = check(str(path))
    out: dict[str, list[str]] = {}
    for f in report.findings:
        out.setdefault(f.rule, []).append(f"{f.key}: {f.message}")
    return report.flavor, out


def _documented(path: str, doc: dict[str, Any]) -> None:
    """The document's spellings (appendix E) everywhere, the v3-valid fill values, a full superblock."""
    attrs = doc["attributes"]
    group = attrs.get("_nczarr_group")
    if group is not None:
        group["dimensions"] = [{"name": n, **spec} for n, spec in group["dimensions"].items()]
        group["subgroups"] = group.pop("groups")
    if "_nczarr_superblock" in attrs:
        attrs["_nczarr_superblock"] = {"version": "3.0.0", "format": 3}
    types = attrs["_nczarr_attrs"]["attribute_types"]
    attrs["_nczarr_attrs"]["attribute_types"] = [{"name": n, "configuration": {"type": t}} for n, t in types.items()]
    if "_nczarr_array" in attrs and "nczarr_type" in attrs["_nczarr_array"]:
        attrs["_nczarr_array"]["type_alias"] = attrs["_nczarr_array"].pop("nczarr_type")
    if isinstance(doc.get("fill_value"), str):
        doc["fill_value"] = 0 if doc["data_type"] == "uint8" else [0] * (int(doc["data_type"][1:]) // 8)


def test_code_layout_findings(tmp_path):
    """As zformat3.c writes: type alias under nczarr_type, a version-only superblock, string char/string fills."""
    flavor, found = _findings(write_store(tmp_path / "code.zarr", sample()))
    assert flavor == DRAFT_FLAVOR
    assert found["NCZ-V3-DRAFT-LAYOUT"] == ["/zarr.json: flavor nczarr-v3-draft: netcdf-c PR #3068's draft layout "
                                            "(unmerged); no released netcdf-c reads it"]
    assert sorted(found["NCZ-V3-DRAFT-TYPE-KEY"]) == [
        "/label/zarr.json: type alias under 'nczarr_type' ('string'); the document reads 'type_alias'",
        "/name/zarr.json: type alias under 'nczarr_type' ('char'); the document reads 'type_alias'"]
    assert found["NCZ-V3-DRAFT-SUPERBLOCK"][0].startswith("/zarr.json: _nczarr_superblock keys ['version']")
    assert sorted(found["NCZ-V3-DRAFT-FILL"]) == [
        "/label/zarr.json: fill_value '' is a string for data_type r64: the v3 spec wants a list of bytes",
        "/name/zarr.json: fill_value '\\x00' is a string for data_type uint8: the v3 spec wants an integer"]
    for rule_id in ("NCZ-V3-DRAFT-DIMENSIONS", "NCZ-V3-DRAFT-SUBGROUPS", "NCZ-V3-DRAFT-ATTRIBUTE-TYPES"):
        assert rule_id not in found, found[rule_id]


def test_document_layout_findings(tmp_path):
    flavor, found = _findings(write_store(tmp_path / "doc.zarr", sample(), edit=_documented))
    assert flavor == DRAFT_FLAVOR
    assert sorted(found["NCZ-V3-DRAFT-TYPE-KEY"]) == [
        "/label/zarr.json: type alias under 'type_alias' ('string'); zformat3.c reads 'nczarr_type'",
        "/name/zarr.json: type alias under 'type_alias' ('char'); zformat3.c reads 'nczarr_type'"]
    assert found["NCZ-V3-DRAFT-DIMENSIONS"][0].startswith("/zarr.json: dimensions as the document's list")
    assert len(found["NCZ-V3-DRAFT-DIMENSIONS"]) == 2  # the root and /g
    assert found["NCZ-V3-DRAFT-SUBGROUPS"][0] == ("/zarr.json: subgroups listed under the document's 'subgroups'; "
                                                  "zformat3.c reads 'groups'")
    assert len(found["NCZ-V3-DRAFT-ATTRIBUTE-TYPES"]) == 8  # every zarr.json: 2 groups, 6 arrays
    for rule_id in ("NCZ-V3-DRAFT-SUPERBLOCK", "NCZ-V3-DRAFT-FILL"):
        assert rule_id not in found, found[rule_id]


def test_nofill_is_a_fill_finding(tmp_path):
    tree = sample()
    tree.vars["t"].no_fill = True
    _, found = _findings(write_store(tmp_path / "nofill.zarr", tree))
    assert "/t/zarr.json: fill_value null (netCDF NOFILL): the v3 spec requires a value; zarr-python refuses it" \
        in found["NCZ-V3-DRAFT-FILL"]


def test_no_draft_findings_on_a_plain_v3_store(tmp_path):
    zarr = pytest.importorskip("zarr")
    g = zarr.open_group(str(tmp_path / "plain.zarr"), mode="w", zarr_format=3)
    g.create_array("a", shape=(2,), dtype="int32", dimension_names=["x"])
    flavor, found = _findings(tmp_path / "plain.zarr")
    assert flavor == "zarr-v3"
    assert not [r for r in found if r.startswith("NCZ-V3-DRAFT")]


# ---- write: nc2nczarr --zarr-format 3 --flavor nczarr-v3-draft -----------------------------------------------------

def _convert_draft(tmp_path: Path, out: str, tree: DGroup | None = None) -> tuple[Path, Path]:
    source = write_nc(tmp_path / "src.nc", tree or sample())
    target = tmp_path / out
    done = _cli("convert", "--zarr-format", "3", "--flavor", DRAFT_FLAVOR, str(source), str(target))
    assert done.returncode == 0, done.stderr
    return source, target


@pytest.mark.parametrize("out", ["draft-dir.zarr", "draft.zip"])
def test_written_draft_reads_back_equal(tmp_path, out):
    source, target = _convert_draft(tmp_path, out)
    done = _cli("convert", str(source), str(tmp_path / "v2.zarr"))
    assert done.returncode == 0, done.stderr
    assert _model(target) == _model(tmp_path / "v2.zarr")
    kind = _cli("dump", "-K", str(target))
    assert kind.stdout.split()[-1] == DRAFT_FLAVOR, kind


def test_written_draft_layout_is_zformat3s(tmp_path):
    """The keys zformat3.c writes (draft_fixtures.py names its lines), compared with the fixture's documents."""
    _, target = _convert_draft(tmp_path, "draft.zarr")
    fixture = write_store(tmp_path / "fixture.zarr", sample())

    def docs(root: Path) -> dict[str, Any]:
        return {str(p.parent.relative_to(root)): json.loads(p.read_text()) for p in root.rglob("zarr.json")}
    ours, theirs = docs(target), docs(fixture)
    assert sorted(ours) == sorted(theirs)
    for node, doc in theirs.items():
        got = ours[node]
        assert list(got) == list(doc), node  # zformat3.c's key order
        for key in ("node_type", "zarr_format", "shape", "chunk_key_encoding", "dimension_names", "codecs"):
            if key != "codecs" or doc["node_type"] == "array":
                assert got.get(key) == doc.get(key), (node, key)
        got_attrs, attrs = got["attributes"], doc["attributes"]
        assert set(got_attrs) == set(attrs), node
        for key in ("_nczarr_group", "_nczarr_superblock", "_nczarr_array"):
            assert got_attrs.get(key) == attrs.get(key), (node, key)
        assert got_attrs["_nczarr_attrs"] == attrs["_nczarr_attrs"] or node == "label", node
    # the fixture's string width is 8; ours sizes it as nc2nczarr's v2 |S (128 unless longer)
    assert ours["label"]["data_type"] == "r1024" and ours["label"]["attributes"]["_nczarr_maxstrlen"] == 128
    # the one deliberate difference: v3-valid char/string fills where zformat3.c writes JSON strings
    assert ours["name"]["fill_value"] == 0 and theirs["name"]["fill_value"] == "\u0000"
    assert ours["label"]["fill_value"] == [0] * 128


def test_written_draft_as_zarr_python_sees_it(tmp_path):
    zarr = pytest.importorskip("zarr")
    source, target = _convert_draft(tmp_path, "draft.zarr")
    g = zarr.open_group(str(target), mode="r")
    with netCDF4.Dataset(source) as nc:
        nc.set_auto_mask(False)
        name = g["name"]
        assert name.dtype == np.dtype("uint8")  # char: zarr-python sees the bytes as uint8
        np.testing.assert_array_equal(name[:], np.frombuffer(nc["name"][:].tobytes(), "u1").reshape(3, 4))
        np.testing.assert_array_equal(g["v"][:], nc["v"][:])
        np.testing.assert_array_equal(g["g/w"][:], nc["g/w"][:])
        assert float(g["s"][...]) == float(nc["s"][...])
        assert g.attrs["title"] == nc.getncattr("title")
        assert g.attrs["_nczarr_superblock"] == {"version": "3.0.0"}  # zarr-python shows the bookkeeping as is
    with pytest.raises(ValueError, match="No Zarr data type found that matches 'r1024'"):
        g["label"]  # zarr-python 3.1.6 has no raw-bits data type: the string variable does not open


def test_written_draft_as_xarray_sees_it(tmp_path):
    xr = pytest.importorskip("xarray")
    tree = sample()
    del tree.vars["label"]  # xarray opens every array; zarr-python opens no r<bits> one
    source, target = _convert_draft(tmp_path, "draft.zarr", tree)
    with netCDF4.Dataset(source) as nc, xr.open_zarr(target, zarr_format=3, consolidated=False,
                                                      mask_and_scale=False) as ds:
        nc.set_auto_mask(False)
        assert ds["v"].dims == ("time", "x")
        np.testing.assert_array_equal(ds["v"].values, nc["v"][:])
        assert ds["name"].dtype == np.dtype("uint8")


def test_draft_write_refuses_shard(tmp_path):
    source = write_nc(tmp_path / "src.nc", sample())
    done = _cli("convert", "--zarr-format", "3", "--flavor", DRAFT_FLAVOR, "--shard", "2", str(source),
                str(tmp_path / "o.zarr"))
    line = assert_one_line_failure(done)
    assert "the draft NCZarr v3 layout (netcdf-c PR #3068) has no shards" in line
    assert not (tmp_path / "o.zarr").exists()


def test_write_api_draft(tmp_path):
    import nczarr_conformance

    model = open_dataset(str(write_store(tmp_path / "fixture.zarr", sample())))
    nczarr_conformance.write(model, str(tmp_path / "api.zarr"), zarr_format=3, flavor=DRAFT_FLAVOR)
    assert _model(tmp_path / "api.zarr") == _model(tmp_path / "fixture.zarr")


def test_check_reads_a_draft_store_as_draft(tmp_path):
    """NCZ-V3-READ reads through the draft reader: a clean store has no error; a missing dimension is one."""
    from nczarr_conformance.checker import check

    _, ours = _convert_draft(tmp_path, "ours.zarr")
    report = check(str(ours), deep=True)
    assert report.flavor == DRAFT_FLAVOR
    assert [(f.rule, f.message) for f in report.findings if f.severity == "error"] == []
    bad = check(str(_hostile(tmp_path, _missing_dim)))
    assert [(f.rule, f.message) for f in bad.findings if f.rule == "NCZ-V3-READ"] == [
        ("NCZ-V3-READ", "/v: dimension /nosuch is not defined")]


def test_fix_to_v3_still_refuses_the_draft(tmp_path):
    """Only nc2nczarr and write() write the draft; nczarr-fix --to-v3 keeps refusing it in one line."""
    from nczarr_conformance.errors import UsageError
    from nczarr_conformance.fix.to_v3 import plan_to_v3
    from nczarr_conformance.stores.memory import MemoryStore

    with pytest.raises(UsageError, match="--flavor nczarr-v3-draft is not written yet for Zarr v3"):
        plan_to_v3(MemoryStore(), DRAFT_FLAVOR)


def test_nczarr_dump_of_written_draft_equals_ncdump_of_the_source(tmp_path):
    """CDL of the draft store (variables in _nczarr_group's order, netCDF's) equals ncdump's of the source file."""
    import shutil

    ncdump = shutil.which("ncdump")
    if ncdump is None:
        pytest.skip("ncdump not installed")
    source, target = _convert_draft(tmp_path, "src.zarr")  # the same base name: the same first CDL line
    ours = _cli("dump", str(target))
    assert ours.returncode == 0, ours.stderr
    theirs = subprocess.run([ncdump, str(source)], capture_output=True, text=True, check=True, timeout=60)
    assert ours.stdout == theirs.stdout
