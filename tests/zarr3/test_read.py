"""Our v3 reader equals zarr-python 3's own reading of stores it wrote (values, shapes, types,
attributes, dimension names, groups); xarray's ``to_zarr(zarr_format=3)`` the same against xarray."""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from nczarr_conformance import keys
from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.model import Attribute, Dataset, Group
from tests.zarr3.conftest import NUMERIC, build_rich, expected

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _node(ds: Dataset, path: str) -> Any:
    parts = [p for p in path.split("/") if p]
    group: Group = ds.root
    for part in parts[:-1]:
        group = group.groups[part]
    if not parts:
        return group
    return group.variables.get(parts[-1]) or group.groups[parts[-1]]


def _attr_python(attr: Attribute) -> Any:
    if attr.type == "char":
        return attr.value
    values = attr.value.tolist()
    return values[0] if len(values) == 1 else values


def _model_values(values: np.ndarray, data_type: Any) -> np.ndarray:
    """zarr-python's values as the model holds them (bytes → text with surrogate escapes; S1 → char)."""
    name = data_type.to_json(zarr_format=3)
    name = name["name"] if isinstance(name, dict) else name
    if name == "variable_length_bytes" or (name == "null_terminated_bytes" and values.dtype.itemsize > 1):
        flat = [v.decode("utf-8", errors="surrogateescape") for v in values.ravel().tolist()]
        return np.array(flat, dtype=object).reshape(values.shape)
    if name == "string":
        return np.array([str(v) for v in values.ravel().tolist()], dtype=object).reshape(values.shape)
    if name == "fixed_length_utf32":
        return values.astype(object)
    return values


def assert_equal_to_zarr(path: Any) -> Dataset:
    ours = open_dataset(str(path))
    for where, exp in expected(path).items():
        node = _node(ours, where)
        if exp[0] == "group":
            assert isinstance(node, Group), where
            assert {n: _attr_python(a) for n, a in node.attributes.items()} == exp[1], where
            continue
        _, values, attrs, dims, data_type = exp
        assert node.shape == values.shape, where
        np.testing.assert_array_equal(node.data, _model_values(values, data_type), err_msg=where)
        assert {n: _attr_python(a) for n, a in node.attributes.items()} == attrs, where
        if dims is not None:
            assert [keys.basename(d) for d in node.dimensions] == list(dims), where
        dtj = data_type.to_json(zarr_format=3)
        name = dtj if isinstance(dtj, str) else dtj["name"]
        if name in NUMERIC:
            assert node.type == NUMERIC[name], where
        elif name == "null_terminated_bytes" and values.dtype.itemsize == 1:
            assert node.type == "char", where
        else:
            assert node.type == "string", where
    return ours


def test_every_feature_equals_zarr_python(tmp_path):
    ours = assert_equal_to_zarr(build_rich(tmp_path / "rich.zarr"))
    # dimension names are shared within the array's group, as xarray means them
    assert set(ours.root.dimensions) >= {"t", "y", "x", "p", "q"}
    assert ours.root.groups["sub"].variables["x"].dimensions == ["/sub/t"]
    assert ours.root.variables["anon"].dimensions == ["/_Anonymous_Dim_2", "/_Anonymous_Dim_3"]
    assert ours.root.variables["big"].endianness == "big"
    assert ours.root.variables["sh"].chunks == [2, 3]  # the read unit: the inner chunk, as zarr-python's .chunks


def test_consolidated_equals_zarr_python(tmp_path):
    path = build_rich(tmp_path / "c.zarr", consolidated=True)
    assert "consolidated_metadata" in json.loads((path / "zarr.json").read_text())
    assert_equal_to_zarr(path)


def test_consolidated_is_authoritative(tmp_path):
    """Decision (zarr3/reader.py): the consolidated copy is used, as zarr-python uses it."""
    zarr = pytest.importorskip("zarr")
    path = build_rich(tmp_path / "c.zarr", consolidated=True)
    sub = path / "sub" / "zarr.json"
    doc = json.loads(sub.read_text())
    doc["attributes"]["where"] = "changed on disk"
    sub.write_text(json.dumps(doc))
    theirs = dict(zarr.open_group(str(path), mode="r", zarr_format=3)["sub"].attrs)
    ours = open_dataset(str(path)).root.groups["sub"].attributes["where"].value
    assert ours == theirs["where"] == "sub"


def test_hex_float_fill_read_as_zarr_python_reads_it(tmp_path):
    zarr = pytest.importorskip("zarr")
    g = zarr.open_group(str(tmp_path / "h.zarr"), mode="w", zarr_format=3)
    g.create_array("f", shape=(3,), chunks=(2,), dtype="float32", fill_value=0, dimension_names=["t"])
    meta = tmp_path / "h.zarr" / "f" / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["fill_value"] = "0x3fc00000"  # 1.5 as IEEE 754 bits
    meta.write_text(json.dumps(doc))
    theirs = zarr.open_array(str(tmp_path / "h.zarr" / "f"), mode="r")[...]
    np.testing.assert_array_equal(open_dataset(str(tmp_path / "h.zarr")).root.variables["f"].data, theirs)
    assert theirs.tolist() == [1.5, 1.5, 1.5]


def test_implicit_group(tmp_path):
    """A directory without zarr.json holding arrays below it reads as a group without attributes."""
    zarr = pytest.importorskip("zarr")
    g = zarr.open_group(str(tmp_path / "i.zarr"), mode="w", zarr_format=3)
    g.create_group("a").create_array("v", shape=(2,), dtype="int32", dimension_names=["t"])[:] = [3, 4]
    (tmp_path / "i.zarr" / "a" / "zarr.json").unlink()
    ds = open_dataset(str(tmp_path / "i.zarr"))
    assert ds.root.groups["a"].variables["v"].data.tolist() == [3, 4]
    assert ds.root.groups["a"].attributes == {}


def test_xarray_to_zarr_v3_equals_xarray(tmp_path):
    xr = pytest.importorskip("xarray")
    source = xr.Dataset(
        {"temp": (("time", "lat"), np.arange(12, dtype="float32").reshape(4, 3), {"units": "K"}),
         "name": (("lat",), np.array(["a", "bb", "ccc"], dtype=object))},
        coords={"time": np.arange(4, dtype="int64"), "lat": np.array([10.0, 20.0, 30.0])},
        attrs={"title": "xarray v3"})
    source.to_zarr(tmp_path / "x.zarr", zarr_format=3, mode="w")
    theirs = xr.open_zarr(tmp_path / "x.zarr", zarr_format=3, decode_cf=False).load()
    ours = open_dataset(str(tmp_path / "x.zarr"))
    assert {n: d.size for n, d in ours.root.dimensions.items()} == dict(theirs.sizes)
    for name, var in theirs.variables.items():
        mine = ours.root.variables[str(name)]
        assert [keys.basename(d) for d in mine.dimensions] == list(var.dims), name
        values = var.values.astype(object) if var.dtype.kind in "OUT" else var.values
        np.testing.assert_array_equal(mine.data, values, err_msg=str(name))
        mine_attrs = {n: _attr_python(a) for n, a in mine.attributes.items()}
        their_attrs = {k: (v.item() if hasattr(v, "item") else v) for k, v in var.attrs.items()}
        assert json.dumps(mine_attrs, sort_keys=True) == json.dumps(their_attrs, sort_keys=True), name
    assert ours.root.attributes["title"].value == theirs.attrs["title"]


def test_conflicting_dimension_lengths_are_one_line(tmp_path):
    """Decision: one group, one length per dimension name (xarray refuses the same)."""
    zarr = pytest.importorskip("zarr")
    from nczarr_conformance.errors import FormatError

    g = zarr.open_group(str(tmp_path / "c.zarr"), mode="w", zarr_format=3)
    g.create_array("a", shape=(2,), dtype="int8", dimension_names=["t"])
    g.create_array("b", shape=(3,), dtype="int8", dimension_names=["t"])
    with pytest.raises(FormatError, match=r"dimension 't' has size 3 here but 2 elsewhere"):
        open_dataset(str(tmp_path / "c.zarr"))
