"""Zarr v2 object arrays (``|O``) with a ``vlen-utf8``/``vlen-bytes`` first filter read as netCDF strings.

What kerchunk and VirtualiZarr write for a netCDF-4 string variable, and what zarr-python writes for ``dtype=str``
in Zarr v2. Expected values come from zarr-python reading the same store (the peer), never from our reader; the
storage (dtype, filters, compressor) is asserted to be what the peer wrote, so a test cannot pass on a layout it
does not name.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nczarr_conformance.checker import check
from nczarr_conformance.errors import FormatError, UnsupportedError
from nczarr_conformance.nczarr.reader import read_dataset
from nczarr_conformance.stores import DirectoryStore
from tests.conftest import require_module

TEXT = ["", "ascii", "ünïcødé", "a" * 300]


def _zarr_python_strings(path: Path, dtype: object, values: list[object], **kw: object) -> dict[str, object]:
    """A zarr-python v2 store holding one variable-length array ``s`` (dimension ``x``); its ``.zarray``."""
    zarr = require_module("zarr")
    g = zarr.open_group(str(path), mode="w", zarr_format=2)
    arr = g.create_array("s", shape=(len(values),), chunks=(3,), dtype=dtype, **kw)
    arr[...] = np.array(values, dtype=object)
    arr.attrs["_ARRAY_DIMENSIONS"] = ["x"]
    return json.loads((path / "s" / ".zarray").read_text())


def _peer_values(path: Path) -> list[object]:
    zarr = require_module("zarr")
    return list(zarr.open_group(str(path), mode="r")["s"][...])


@pytest.mark.parametrize("compressors", [None, "default"])
def test_vlen_utf8_reads_as_string_like_zarr_python(tmp_path, compressors):
    kw = {} if compressors == "default" else {"compressors": None}
    zarray = _zarr_python_strings(tmp_path / "s.zarr", str, TEXT, **kw)
    assert (zarray["dtype"], zarray["filters"]) == ("|O", [{"id": "vlen-utf8"}])
    assert (zarray["compressor"] is None) == (compressors is None)
    var = read_dataset(DirectoryStore(str(tmp_path / "s.zarr"))).root.variables["s"]
    assert (var.type, var.shape, var.chunks, var.dimensions) == ("string", (4,), [3], ["/x"])
    assert var.data.tolist() == _peer_values(tmp_path / "s.zarr")


def test_vlen_bytes_reads_as_string(tmp_path):
    zarr = require_module("zarr")
    from zarr.core.dtype import VariableLengthBytes

    path = tmp_path / "b.zarr"
    g = zarr.open_group(str(path), mode="w", zarr_format=2)
    arr = g.create_array("s", shape=(2,), chunks=(3,), dtype=VariableLengthBytes(), compressors=None)
    arr[...] = np.array([b"ab", "é".encode()], dtype=object)
    zarray = json.loads((path / "s" / ".zarray").read_text())
    assert (zarray["dtype"], zarray["filters"]) == ("|O", [{"id": "vlen-bytes"}])
    var = read_dataset(DirectoryStore(str(path))).root.variables["s"]
    assert var.type == "string"
    assert var.data.tolist() == [v.decode() for v in _peer_values(path)]


def test_hostile_vlen_chunk_is_one_line(tmp_path):
    """A chunk whose header claims 2**31 items (numcodecs would allocate them all first) is refused by name."""
    _zarr_python_strings(tmp_path / "h.zarr", str, ["a", "b", "c"], compressors=None)
    (tmp_path / "h.zarr" / "s" / "0").write_bytes((2**31).to_bytes(4, "little") + b"\x01\x00\x00\x00a")
    with pytest.raises(FormatError, match=r"^/s/0: vlen-utf8 chunk header declares 2147483648 values in a chunk "
                                          r"of 3$"):
        read_dataset(DirectoryStore(str(tmp_path / "h.zarr")))


def test_deep_check_counts_the_items_of_a_hostile_vlen_chunk_before_decoding(tmp_path):
    """nczarr-check --deep decodes each chunk as our reader does: a header claiming 2**31 items is a finding, not
    16 GiB of objects numcodecs allocates first; an honest chunk of long strings (more stored bytes than 8 per
    item) is none."""
    _zarr_python_strings(tmp_path / "h.zarr", str, ["a" * 300, "b", "c"], compressors=None)
    assert not [f for f in check(str(tmp_path / "h.zarr"), deep=True).findings if f.severity.name == "ERROR"]
    (tmp_path / "h.zarr" / "s" / "0").write_bytes((2**31).to_bytes(4, "little") + b"\x01\x00\x00\x00a")
    found = [(f.rule, f.key, f.message) for f in check(str(tmp_path / "h.zarr"), deep=True).findings
             if f.severity.name == "ERROR"]
    assert found == [("NCZ-CHUNK-DECODE", "/s/0", "does not decode: /s/0: vlen-utf8 chunk header declares "
                                                  "2147483648 values in a chunk of 3")]


def test_object_dtype_without_vlen_filter_is_refused(tmp_path):
    path = tmp_path / "o.zarr"
    _zarr_python_strings(path, str, ["a", "b", "c"], compressors=None)
    doc = json.loads((path / "s" / ".zarray").read_text())
    doc["filters"] = [{"id": "json2", "encoding": "utf-8"}]
    (path / "s" / ".zarray").write_text(json.dumps(doc))
    with pytest.raises(UnsupportedError, match=r"dtype '\|O' \(object\) is netCDF string only with a vlen-utf8 "
                                               r"or vlen-bytes first filter"):
        read_dataset(DirectoryStore(str(path)))
    findings = {f.rule for f in check(str(path)).findings}
    assert "NCZ-ARRAY-DTYPE" in findings


def test_check_takes_vlen_strings_as_a_netcdf_type(tmp_path):
    _zarr_python_strings(tmp_path / "s.zarr", str, TEXT, compressors=None)
    report = check(str(tmp_path / "s.zarr"), deep=True)
    assert not [f for f in report.findings if f.severity.name == "ERROR"], report.findings
