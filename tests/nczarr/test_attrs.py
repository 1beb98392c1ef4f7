"""The JSON attribute convention (nczarr.md Appendix D) and the string/char mapping (Appendix E)."""
from __future__ import annotations

import numpy as np
import pytest

from nczarr_conformance.model import Attribute
from nczarr_conformance.nczarr import attrs
from nczarr_conformance.nczarr.dtypes import dtype_string, parse_attr_type, parse_dtype
from tests.conftest import require_module


@pytest.mark.parametrize("attr,value,dtype", [
    (Attribute("int", np.array([7])), 7, "<i4"),                        # write case 1
    (Attribute("short", np.array([1, 2])), [1, 2], "<i2"),              # write case 2
    (Attribute("char", '{"a": 1}'), {"a": 1}, ">S1"),                    # write case 3
    (Attribute("char", "[[1.0,0.0],[0.0,1.0]]"), [[1.0, 0.0], [0.0, 1.0]], ">S1"),  # case 3, nested
    (Attribute("char", "plain text"), "plain text", ">S1"),              # write case 4
    (Attribute("char", "42"), 42, ">S1"),                                # case 3: a JSON number
    (Attribute("char", "true"), True, ">S1"),                            # case 3: a JSON literal
    (Attribute("char", "[1,2]"), [1, 2], ">S1"),                         # case 3: a flat array, netcdf-c layout
    (Attribute("char", "[1, 2]"), "[1, 2]", ">S1"),                      # case 4: would lose its space
    (Attribute("char", '"quoted"'), '"quoted"', ">S1"),                  # case 4: would lose its quotes
    (Attribute("char", "NaN"), "NaN", ">S1"),                            # case 4: not standard JSON
    (Attribute("char", " 42"), " 42", ">S1"),                            # case 4: would lose its space
    (Attribute("char", '{"a":1}'), '{"a":1}', ">S1"),                    # case 4: would not read back exactly
    (Attribute("double", np.array([3.141592653589793])), 3.141592653589793, "<f8"),
    (Attribute("float", np.array([0.1], "f4")), 0.1, "<f4"),
    (Attribute("double", np.array([np.nan, np.inf])), ["NaN", "Infinity"], "<f8"),
    (Attribute("uint64", np.array([2**64 - 1], "u8")), 2**64 - 1, "<u8"),
    (Attribute("string", np.array(["a", "bb"], dtype=object)), ["a", "bb"], "|S128"),
])
def test_write_cases(attr, value, dtype):
    """Appendix D as written (``--json-attributes=spec``)."""
    assert attrs.encode(attr, mode="spec") == (value, dtype)
    with attrs.json_attributes("spec"):
        assert attrs.encode(attr) == (value, dtype)
    back = attrs.decode(value, dtype)
    assert back.type == attr.type
    if attr.type == "char":
        assert back.value == attr.value
    else:
        np.testing.assert_array_equal(back.value, attr.value)


@pytest.mark.parametrize("text", ['{"a": 1}', "[[1.0,0.0],[0.0,1.0]]", "42", "true", "[1,2]", "1.2", "plain"])
def test_default_writes_char_text_as_a_json_string(text):
    """The default (lossless): every char text is a JSON string, which every reader gives back as is."""
    assert attrs.encode(Attribute("char", text)) == (text, ">S1")
    assert attrs.encode(Attribute("char", text), mode="lossless") == (text, ">S1")
    with attrs.json_attributes("spec"), attrs.json_attributes("lossless"):
        assert attrs.encode(Attribute("char", text)) == (text, ">S1")


def test_unknown_json_attribute_mode_is_refused():
    with pytest.raises(ValueError, match="not one of lossless, spec"), attrs.json_attributes("literal"):
        pass


@pytest.mark.parametrize("value,dtype,expect_type,expect", [
    (5, "<i2", "short", [5]),                                           # read case 1, typed
    (5, None, "int", [5]),                                              # read case 1, inferred
    (2**40, None, "int64", [2**40]),
    (2**64 - 1, None, "uint64", [2**64 - 1]),
    (1.5, None, "double", [1.5]),
    ([1, 2.5], None, "double", [1.0, 2.5]),                              # read case 2, inferred
    ([[1, 2], [3]], None, "char", "[[1,2],[3]]"),                        # read case 3
    ({"k": [1, {"z": None}]}, None, "char", '{"k": [1,{"z": null}]}'),   # read case 4
    ({"k": 1}, ">S1", "char", '{"k": 1}'),
    ("text", None, "char", "text"),
    (["a", "b"], None, "char", '["a","b"]'),                             # netcdf-c: untyped string list → char
    (True, None, "char", "true"),
])
def test_read_cases(value, dtype, expect_type, expect):
    attr = attrs.decode(value, dtype)
    assert attr.type == expect_type
    if expect_type == "char":
        assert attr.value == expect
    else:
        assert attr.value.tolist() == expect


@pytest.mark.parametrize("nctype,text", [("char", ">S1"), ("string", "|S128"), ("byte", "|i1"), ("ubyte", "|u1"),
                                         ("int", "<i4")])
def test_variable_dtypes(nctype, text):
    assert dtype_string(nctype) == text
    assert parse_dtype(text).nctype == nctype


def test_read_mapping_appendix_e():
    assert parse_dtype(">S1").nctype == "char"
    assert parse_dtype("|S1").nctype == "string"          # Appendix E: |S1 is a string of maxstrlen 1
    assert parse_dtype("|S7").maxstrlen == 7
    assert parse_dtype("<U1", u1_is_char=True).nctype == "char"   # netcdf-c 4.9.0's char
    assert parse_dtype("<U3").nctype == "string"
    assert parse_attr_type("|J0") is None
    assert parse_attr_type("<U1") == "char"


def test_string_maxstrlen_grows_for_long_strings():
    import json

    from nczarr_conformance.model import Dataset, Dimension, Group, Variable
    from nczarr_conformance.nczarr.writer import write_dataset
    from nczarr_conformance.stores import MemoryStore

    root = Group({"x": Dimension(2)})
    root.variables["s"] = Variable("string", ["/x"], (2,), {}, np.array(["é" * 100, ""], dtype=object))
    store = MemoryStore()
    write_dataset(Dataset(root), store)
    assert json.loads(store.objects["/s/.zarray"])["dtype"] == "|S200"
    # the dtype alone carries the length: netcdf-c shows a _nczarr_maxstrlen as a user attribute (issue 34)
    assert "_nczarr_maxstrlen" not in json.loads(store.objects["/s/.zattrs"])


#: untyped (pure Zarr) JSON integers at every edge of netcdf-c's inference (libnczarr's NCZ_inferinttype): a negative
#: value is int down to -2**31, then int64; a positive one int, uint up to 2**32-1, int64, and uint64 from 2**63-1 up
UNTYPED_INTEGERS = {
    "neg": -1, "near_min": -34, "int_min": -2**31, "below_int": -2**31 - 1, "int64_min": -2**63,
    "int_max": 2**31 - 1, "above_int": 2**31, "uint_max": 2**32 - 1, "above_uint": 2**32,
    "int64_below_max": 2**63 - 2, "int64_max": 2**63 - 1, "above_int64": 2**63, "uint64_max": 2**64 - 1,
    "list_int": [-2**31, 5], "list_uint": [2**31, 5], "list_uint_zero": [2**31, 0],
    "list_int64": [-2**31 - 1, 2**32 - 1], "list_uint64": [2**63 - 1, 1],
}


@pytest.mark.peer
def test_untyped_integers_near_the_type_limits_get_netcdf_cs_types(tmp_path):
    """A pure Zarr attribute has no type: the reader infers one from the JSON integers as netcdf-c does (the
    expected types and values are netCDF4-python's, read from the same store; a list takes its first value's type)."""
    import json

    netCDF4 = require_module("netCDF4")
    from nczarr_conformance.access.dataset import open_dataset

    store = tmp_path / "untyped.zarr"
    store.mkdir()
    (store / ".zgroup").write_text('{"zarr_format": 2}')
    (store / ".zattrs").write_text(json.dumps(UNTYPED_INTEGERS))
    nctype = {"int32": "int", "uint32": "uint", "int64": "int64", "uint64": "uint64"}
    with netCDF4.Dataset(f"file://{store}#mode=zarr,file") as nc:
        expected = {name: (nctype[np.asarray(nc.getncattr(name)).dtype.name],
                           np.atleast_1d(nc.getncattr(name)).tolist()) for name in nc.ncattrs()}
    got = open_dataset(str(store)).root.attributes
    assert {name: (a.type, a.value.tolist()) for name, a in got.items()} == expected
