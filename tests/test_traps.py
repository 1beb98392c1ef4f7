"""Small traps (issue 23, "Traps"): an output named like a netCDF file, inputs that are no netCDF file.

``nc2nczarr in.nc out.nc`` is refused in one line naming a better name (exit 2, nothing written).
GRIB, HDF4, CDL and other text, and an HDF5 file that is not netCDF-4, get one line naming what
they are and what to do, in nc2nczarr, nczarr-dump and nczarr-check alike (stores/sniff.py is the
one place that says it). The GRIB and HDF4 files here are their magic bytes written by hand and
random bytes after them: ecCodes and pyhdf are not installed here, and a file that is only its
magic is exactly what the commands look at before refusing.
"""
from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO, require_module

h5py = require_module("h5py")
netCDF4 = require_module("netCDF4")

COMMANDS = {"nc2nczarr": "convert", "nczarr-dump": "dump", "nczarr-check": "check"}


def cli(command: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", f"nczarr_conformance.cli.{COMMANDS[command]}", *args],
                          capture_output=True, text=True, timeout=120, env=env, check=False)


def _netcdf4(path: Path) -> Path:
    with netCDF4.Dataset(str(path), "w") as nc:
        nc.createDimension("x", 3)
        nc.createVariable("v", "f4", ("x",))[:] = [1, 2, 3]
    return path


# ---- the output -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ending", [".nc", ".nc4", ".h5", ".hdf5", ".NC"])
def test_an_output_named_like_a_netcdf_file_is_refused_with_a_better_name(ending: str, tmp_path: Path) -> None:
    src = _netcdf4(tmp_path / "in.nc")
    out = tmp_path / f"out{ending}"
    done = cli("nc2nczarr", str(src), str(out))
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"nc2nczarr: {out}: an output ending {ending} names a netCDF file, and nc2nczarr writes an "
                           f"NCZarr store: name it {tmp_path / 'out'}.zarr (a directory) or {tmp_path / 'out'}.zip, or "
                           f"keep the name with file://{out}#mode=nczarr,file\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.nc"]  # nothing written


def test_concat_into_an_output_named_like_a_netcdf_file_is_refused(tmp_path: Path) -> None:
    src = _netcdf4(tmp_path / "in.nc")
    done = cli("nc2nczarr", "--concat", "x", str(src), str(tmp_path / "all.nc"))
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "an output ending .nc names a netCDF file" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.nc"]


def test_the_url_form_keeps_a_netcdf_like_name(tmp_path: Path) -> None:
    """The mode says what to write: netcdf-c's own spelling of a store named out.nc is taken as asked."""
    src = _netcdf4(tmp_path / "in.nc")
    done = cli("nc2nczarr", "--quiet", str(src), f"file://{tmp_path / 'out.nc'}#mode=nczarr,file")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out.nc" / ".zgroup").is_file()
    with netCDF4.Dataset(f"file://{tmp_path / 'out.nc'}#mode=nczarr,file") as nc:
        assert nc["v"][:].tolist() == [1, 2, 3]


# ---- inputs that are no netCDF file ---------------------------------------------------------------------

def _grib(path: Path) -> Path:
    """GRIB edition 2's indicator section starts "GRIB"; the rest is not a GRIB message (no ecCodes here)."""
    path.write_bytes(b"GRIB\x00\x00\x00\x02" + (1234).to_bytes(8, "big") + os.urandom(1000))
    return path


def _hdf4(path: Path) -> Path:
    """HDF4's magic cookie 0e 03 13 01 (DFH_MAGIC); the rest is not HDF4 (no pyhdf here)."""
    path.write_bytes(b"\x0e\x03\x13\x01" + os.urandom(1000))
    return path


def _cdl(path: Path) -> Path:
    path.write_text("// made by hand\nnetcdf x {\ndimensions:\n\tx = 2 ;\nvariables:\n\tint v(x) ;\n"
                    "data:\n v = 1, 2 ;\n}\n")
    return path


def _csv(path: Path) -> Path:
    path.write_text("time,value\n0,1.5\n1,2.5\n")
    return path


#: kind → (make it, what the line says it is, what the line tells the user to do)
FOREIGN = {
    "grib": (_grib, "GRIB file, not netCDF or an NCZarr store", "grib_to_netcdf -k 4"),
    "hdf4": (_hdf4, "HDF4 file, not netCDF or an NCZarr store", "h4toh5"),
    "cdl": (_cdl, "CDL text, not netCDF or an NCZarr store", "ncgen -k nc4 -o OUT.nc IN"),
    "text": (_csv, "text file, not netCDF or an NCZarr store", "read netCDF-3 and netCDF-4/HDF5 files"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("kind", sorted(FOREIGN))
def test_a_file_that_is_no_netcdf_file_is_named_in_one_line(kind: str, command: str, tmp_path: Path) -> None:
    make, what, todo = FOREIGN[kind]
    src = make(tmp_path / "input.dat")
    args = [str(src), str(tmp_path / "out.zarr")] if command == "nc2nczarr" else [str(src)]
    done = cli(command, *args)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"{command}: {src}: {what}: ") and done.stderr.count("\n") == 1, done.stderr
    assert todo in done.stderr
    assert done.stdout == "" and sorted(p.name for p in tmp_path.iterdir()) == ["input.dat"]


def _plain_hdf5(path: Path, *, openable: bool) -> Path:
    """HDF5 from h5py: no _NCProperties, no dimension scale. Not ``openable``: a stray _Netcdf4Coordinates
    of two dimension ids makes netcdf-c 4.10.1 fail to open it ("NetCDF: HDF error")."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with h5py.File(path, "w") as f:
            x = f.create_dataset("x", data=np.arange(3.0))
            if not openable:
                x.attrs["_Netcdf4Coordinates"] = np.array([5, 6], dtype="i4")
    return path


@pytest.mark.parametrize("command", ["nc2nczarr", "nczarr-dump"])
def test_an_hdf5_file_that_is_not_netcdf4_and_will_not_open_is_named(command: str, tmp_path: Path) -> None:
    src = _plain_hdf5(tmp_path / "plain.h5", openable=False)
    with pytest.raises(OSError, match="HDF error"):
        netCDF4.Dataset(str(src))  # the peer's own failure, so the test notices when netcdf-c opens it
    args = [str(src), str(tmp_path / "out.zarr")] if command == "nc2nczarr" else [str(src)]
    done = cli(command, *args)
    assert done.returncode == 2
    assert done.stderr == (f"{command}: {src}: HDF5 file that is not netCDF-4 (no _NCProperties, no dimension "
                           "scales): netCDF-4 cannot open it (NetCDF: HDF error); look at it with h5dump -H, and write "
                           "what you need into a netCDF-4 file (netCDF4-python, xarray, or h5py with dimension "
                           "scales), then nc2nczarr\n")
    assert not (tmp_path / "out.zarr").exists()


def test_nczarr_check_names_an_hdf5_file_that_is_not_netcdf4(tmp_path: Path) -> None:
    src = _plain_hdf5(tmp_path / "plain.h5", openable=True)
    done = cli("nczarr-check", str(src))
    said = (f"nczarr-check: {src}: HDF5 file that is not netCDF-4 (no _NCProperties, no dimension scales), not a "
            "store: nc2nczarr converts what netCDF-4 can read of it\n")
    assert (done.returncode, done.stderr) == (2, said)
    netcdf = _netcdf4(tmp_path / "real.nc")  # a netCDF-4 file keeps its own line
    done = cli("nczarr-check", str(netcdf))
    assert done.stderr == f"nczarr-check: {netcdf}: is a netCDF file, not a store: convert it with nc2nczarr\n"


def test_an_hdf5_file_that_is_not_netcdf4_but_opens_still_converts(tmp_path: Path) -> None:
    """The hint is for a failure: what netCDF-4 reads of a plain HDF5 file converts as before."""
    src = _plain_hdf5(tmp_path / "plain.h5", openable=True)
    done = cli("nc2nczarr", "--quiet", str(src), str(tmp_path / "out.zarr"))
    assert (done.returncode, done.stderr) == (0, "")
