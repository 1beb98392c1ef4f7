"""``nc2nczarr --reference`` on the real netCDF-4 files of the corpus and the installed packages (issue 36).

Each file's references (kerchunk JSON, no byte copied) read back through our reader as netCDF4-python reads
the file itself: values, types, fill, attributes, groups, dimensions and storage (a contiguous dataset is
one reference of its whole shape: that one field is compared as such). The conversion runs in this process:
the command and its exit codes are tests/test_references.py's.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.conversion.references import convert_references
from nczarr_conformance.errors import UnsupportedError
from nczarr_conformance.model import diff
from nczarr_conformance.sources import netcdf4 as nc4
from tests.real_files import REAL, REAL_IDS, UNDEFINED, is_netcdf3

h5py = pytest.importorskip("h5py")

CONTIGUOUS = {"contiguous": "a contiguous dataset is one Zarr chunk of its whole shape (one reference)"}
#: netCDF-4 files only: a netCDF-3 file has no HDF5 chunks to reference (refused: tests/test_references.py)
NETCDF4 = [(p, i) for p, i in zip(REAL, REAL_IDS, strict=True) if not is_netcdf3(p)]
#: variables shorter than their unlimited dimension, whose rows past the HDF5 extent netcdf-c 4.10.1 reads
#: partly as uninitialised memory (test_netcdf_c_reads_rows_past_the_extent_as_garbage): compared with h5py
PAST_EXTENT = {"bad_missing_data.nc": ("temp",)}


def _references(src: Path, tmp_path: Path) -> Path:
    out = tmp_path / "refs.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the inlined variables' notes: said by the command, tested there
        convert_references(str(src), str(out))
    return out


def test_the_real_netcdf4_files_are_found() -> None:
    assert len(NETCDF4) >= 12, [i for _, i in NETCDF4]


@pytest.mark.parametrize("src", [p for p, _ in NETCDF4], ids=[i for _, i in NETCDF4])
def test_references_read_back_as_netcdf4_reads_the_file(src: Path, tmp_path: Path) -> None:
    want = nc4.read(str(src))
    got = open_dataset(str(_references(src, tmp_path)))
    skipped = UNDEFINED.get(src.name, ()) + tuple(f"/{v}" for v in PAST_EXTENT.get(src.name, ()))
    for key in skipped:  # compared below against h5py, or undefined (tests/real_files.py)
        for model in (want, got):
            model.root.variables[key.strip("/")].data = None
    assert diff(want, got, ignore=CONTIGUOUS) == []


def _past_extent() -> tuple[Path, str, np.ndarray, int, int]:
    """bad_missing_data.nc's temp: (file, name, h5py's values, h5py's fill, the unlimited dimension's length)."""
    src = next(p for p, _ in NETCDF4 if p.name in PAST_EXTENT)
    name = PAST_EXTENT[src.name][0]
    with h5py.File(src, "r") as f:
        values, fill = f[name][...], int(f[name].fillvalue)
    length = nc4.read(str(src), data=False).root.variables[name].shape[0]
    assert length > values.shape[0]  # the precondition: rows the HDF5 dataset does not hold
    return src, name, values, fill, length


def test_rows_past_the_hdf5_extent_read_as_the_fill(tmp_path: Path) -> None:
    """What h5py holds, then the fill value (netCDF's rule for a variable shorter than its unlimited dimension)."""
    src, name, values, fill, length = _past_extent()
    got = np.asarray(open_dataset(str(_references(src, tmp_path))).root.variables[name].data)
    np.testing.assert_array_equal(got[: values.shape[0]], values)
    assert (got[values.shape[0]:] == fill).all() and got.shape[0] == length


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="netcdf-c 4.10.1 (netCDF4-python's) reads the rows of bad_missing_data.nc's temp past its "
                          "HDF5 extent as the fill, then uninitialised memory (e.g. [-999, 2685476833, 0])")
def test_netcdf_c_reads_rows_past_the_extent_as_the_fill() -> None:
    src, name, values, fill, _ = _past_extent()
    row = np.asarray(nc4.read(str(src)).root.variables[name].data)[values.shape[0]:]
    assert (row == fill).all(), row.tolist()


# ---- --for xarray: the references xarray reads as it reads the file ---------------------------------------------
#: files whose --for xarray references xarray's zarr engine reads otherwise than its netcdf4 engine reads the file,
#: each with the difference (Zarr v2 attributes are JSON: a float32 attribute is a float64 there, an infinite one
#: the text "Infinity", which xarray's zarr engine leaves as text; char data xarray's netcdf4 engine joins into
#: strings). Not in the plan's table (reader_needs.py) yet: seen 2026-12-06.
XARRAY_DIFFERS = {
    "bad_missing_data.nc": "netcdf-c reads rows past temp's HDF5 extent as uninitialised memory (see above)",
    "f03tst_open_mem.nc": "var2 is NOFILL and never written: netcdf-c returns uninitialised memory",
    "ref_nc_test_netcdf4_4_0.nc": "float attributes holding ±inf read as the text '-Infinity'/'Infinity'",
    "ref_test_corrupt_magic.nc": "a char variable: bytes objects, where the netcdf4 engine gives <U19 strings",
    "20171025_2056.Cloud_Top_Height.nc": "x, y decoded to float64 (the float32 scale_factor is a JSON float)",
    "test_gold.nc": "a float attribute _FILLVALUE NaN read as the text 'NaN'",
}


@pytest.mark.parametrize("src", [pytest.param(p, marks=pytest.mark.xfail(
    strict=True, raises=AssertionError, reason=XARRAY_DIFFERS[p.name])) if p.name in XARRAY_DIFFERS else p
    for p, _ in NETCDF4], ids=[i for _, i in NETCDF4])
def test_for_xarray_references_read_in_xarray_as_the_file_reads(src: Path, tmp_path: Path) -> None:
    """``nc2nczarr IN.nc OUT.json --reference --for xarray``: xarray's zarr engine over fsspec's reference
    filesystem gives what its netcdf4 engine gives from the file (the default layout's default fills and
    ``_scalar_`` dimensions did not)."""
    xr = pytest.importorskip("xarray")
    out = tmp_path / "refs.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        convert_references(str(src), str(out), for_readers=["xarray"])
        with xr.open_dataset(src, engine="netcdf4") as want, xr.open_dataset(
                "reference://", engine="zarr", backend_kwargs={"storage_options": {"fo": str(out)},
                                                               "consolidated": False}) as got:
            xr.testing.assert_identical(got.load(), want.load())


def test_for_a_reader_that_needs_other_codecs_references_are_refused_naming_them(tmp_path: Path) -> None:
    """netcdf-c 4.9.0 (Debian's) has no NCZarr codecs: its plan drops them, which references cannot."""
    src = next(p for p, _ in NETCDF4 if p.name == "test_gold.nc")
    out = tmp_path / "refs.json"
    with pytest.raises(UnsupportedError, match=r"--for netcdf-c-4.9: those readers need compression none of /"):
        convert_references(str(src), str(out), for_readers=["netcdf-c-4.9"])
    assert not out.exists()
