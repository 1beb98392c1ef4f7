"""Each peer adapter reports storage as that peer sees it, so "a peer reads ours equal" covers storage."""
from __future__ import annotations

import numpy as np
import pytest

from nczarr_conformance.model import Dataset, Dimension, Group, Variable
from nczarr_conformance.nczarr.reader import read_dataset
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.peers import netcdf4
from nczarr_conformance.peers.zarr_python import ZarrPython
from nczarr_conformance.stores import DirectoryStore
from nczarr_conformance.urls import to_file_url
from tests.conftest import require_module

pytestmark = pytest.mark.peer


def _stored(tmp_path):
    root = Group({"x": Dimension(10), "y": Dimension(4)})
    root.variables["f"] = Variable("float", ["/x", "/y"], (10, 4), {}, np.arange(40, dtype=">f4").reshape(10, 4),
                                   chunks=[3, 4], endianness="big",
                                   filters=[{"id": "shuffle", "elementsize": 4}, {"id": "zlib", "level": 7}])
    root.variables["i"] = Variable("int", ["/x"], (10,), {}, np.arange(10, dtype="<i4"), chunks=[5], no_fill=True,
                                   endianness="little", filters=[])
    with DirectoryStore(tmp_path / "s.file", "w") as store:
        write_dataset(Dataset(root), store)
    return root, tmp_path / "s.file"


def _storage(var: Variable) -> dict:
    return {"chunks": var.chunks, "endianness": var.endianness, "filters": var.filters, "no_fill": var.no_fill}


def test_zarr_python_reports_the_array_metadata_we_wrote(tmp_path):
    require_module("zarr")
    root, path = _stored(tmp_path)
    theirs = ZarrPython().read(str(path)).root.variables
    for name, var in root.variables.items():
        assert _storage(theirs[name]) == _storage(var), name
        assert (theirs[name].order, theirs[name].dimension_separator) == ("C", "."), name


def test_netcdf4_reports_chunking_filters_endian_and_nofill_we_wrote(tmp_path):
    """netCDF4-python has no API for Zarr's order or dimension separator: those two are not compared."""
    root, path = _stored(tmp_path)
    theirs = netcdf4.read(to_file_url(str(path), "file")).root.variables
    ours = read_dataset(DirectoryStore(path)).root.variables
    for name, var in root.variables.items():
        assert _storage(theirs[name]) == _storage(var) == _storage(ours[name]), name
