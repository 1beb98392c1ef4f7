"""Types outside the NCZarr model, and names that would collide with Zarr's keys, are refused clearly.

Compound, vlen, opaque and enum variables and attributes: one stderr line naming each (with its
type), exit 2, nothing written; with ``--skip-unsupported`` each is named in a warning and left out,
and the rest converts. The file is made by ncgen (netcdf-bin) from CDL, since netCDF4-python
cannot make opaque types; the expected names and types are the CDL's.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import require_module, require_tool
from tests.test_convert_valid import PATHS, differences, run_cli

netCDF4 = require_module("netCDF4")

CDL = """netcdf user_types {
types:
  compound cmp_t { int i ; double d ; } ;
  int(*) vlen_t ;
  opaque(4) opq_t ;
  ubyte enum cloud_t { clear = 0, cumulus = 1, stratus = 2 } ;
dimensions:
  x = 2 ;
variables:
  cmp_t c(x) ;
  vlen_t v(x) ;
  opq_t o(x) ;
  cloud_t e(x) ;
  int ok(x) ;
    ok:note = "plain" ;
    cmp_t ok:catt = {1, 2.5} ;
  double plain(x) ;
  :title = "user types" ;
  cloud_t :gatt = stratus ;
data:
  c = {1, 1.5}, {2, 2.5} ;
  v = {1, 2}, {3} ;
  o = 0XDEADBEEF, 0XCAFEBABE ;
  e = clear, stratus ;
  ok = 5, 6 ;
  plain = 0.5, -1 ;
}
"""
OUTSIDE = {"/c": "compound cmp_t", "/v": "vlen vlen_t", "/o": "opaque opq_t", "/e": "enum cloud_t",
           "/ok:catt": "compound cmp_t", "/:gatt": "enum cloud_t"}


@pytest.fixture(scope="module")
def user_types(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ncgen = require_tool("ncgen")
    folder = tmp_path_factory.mktemp("user_types")
    (folder / "u.cdl").write_text(CDL)
    subprocess.run([ncgen, "-4", "-o", str(folder / "u.nc"), str(folder / "u.cdl")], check=True)
    return folder / "u.nc"


@pytest.mark.parametrize("path", PATHS)
def test_user_types_refused_in_one_line_naming_each(user_types: Path, tmp_path: Path, path: list[str]) -> None:
    out = tmp_path / "out.file"
    done = run_cli(*path, str(user_types), str(out))
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert str(user_types) in lines[0]
    for where, kind in OUTSIDE.items():
        assert f"{where} ({kind})" in lines[0]
    assert "/ok " not in lines[0] and "/plain" not in lines[0]
    assert list(tmp_path.iterdir()) == []  # nothing written, no partial output left


@pytest.mark.parametrize("path", PATHS)
def test_skip_unsupported_names_each_and_converts_the_rest(user_types: Path, tmp_path: Path,
                                                           path: list[str]) -> None:
    out = tmp_path / "out.file"
    done = run_cli("--quiet", "--skip-unsupported", *path, str(user_types), str(out))
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if line.startswith("nc2nczarr: warning: ")]
    assert warned == done.stderr.splitlines() and len(warned) == len(OUTSIDE) + 1
    named = {re.search(r": (/\S*) left out: (.+) is outside", w).groups() for w in warned[:-1]}  # type: ignore[union-attr]
    assert named == set(OUTSIDE.items())
    # the types ncgen committed go with them, named in one line (issue 23: nothing dropped without a word)
    assert warned[-1] == (f"nc2nczarr: warning: {user_types}: left out, holding no variable's values: "
                          + ", ".join(f"/{t} (named datatype {k}: the NCZarr model keeps no type definitions)"
                                      for t, k in (("cmp_t", "compound"), ("vlen_t", "vlen"), ("opq_t", "opaque"),
                                                   ("cloud_t", "enum"))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with netCDF4.Dataset(f"file://{out}#mode=nczarr,file") as nc:
            assert sorted(nc.variables) == ["ok", "plain"]
            assert nc["ok"].ncattrs() == ["note"] and nc.ncattrs() == ["title"]
            assert nc["ok"][:].tolist() == [5, 6] and nc["plain"][:].tolist() == [0.5, -1.0]


def _zarr_key_names(path: Path) -> Path:
    """A netCDF-4 file with variables and a group named like Zarr's metadata keys (h5py can make them)."""
    import h5py

    with netCDF4.Dataset(str(path), "w") as nc:
        nc.createDimension("x", 2)
        nc.createVariable("ok", "i4", ("x",))[:] = [1, 2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with h5py.File(path, "a") as f:
            for name in (".zarray", ".zattrs", ".zmetadata"):
                f.create_dataset(name, data=np.array([1, 2], dtype="i4")).dims[0].attach_scale(f["x"])
            f.create_group(".zgroup")
    with netCDF4.Dataset(str(path)) as nc:  # netcdf-c shows them as ordinary variables and a group
        assert {".zarray", ".zattrs", ".zmetadata"} <= set(nc.variables) and ".zgroup" in nc.groups
    return path


@pytest.mark.parametrize("path", PATHS)
def test_names_colliding_with_zarr_keys_refused(tmp_path: Path, path: list[str]) -> None:
    src = _zarr_key_names(tmp_path / "keys.nc")
    out = tmp_path / "out.file"
    done = run_cli(*path, str(src), str(out))
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr and "unexpected" not in lines[0]
    for name in ("/.zarray", "/.zattrs", "/.zmetadata", "/.zgroup"):
        assert name in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keys.nc"]


def test_the_rest_of_a_skipped_file_equals_the_source(user_types: Path, tmp_path: Path) -> None:
    """What is left after skipping is converted faithfully (values and storage through netCDF4-python)."""
    plain = tmp_path / "plain.nc"
    with netCDF4.Dataset(str(user_types)) as a, netCDF4.Dataset(str(plain), "w") as b:
        b.createDimension("x", 2)
        b.setncattr("title", a.getncattr("title"))
        for name in ("ok", "plain"):
            src = a[name]
            dst = b.createVariable(name, src.dtype, src.dimensions)
            for attr in src.ncattrs():
                if attr == "note":
                    dst.setncattr(attr, src.getncattr(attr))
            dst[:] = src[:]
    out = tmp_path / "out.file"
    assert run_cli("--quiet", "--skip-unsupported", str(user_types), str(out)).returncode == 0
    assert differences(plain, out) == []


def test_nested_compound_array_netcdf4_python_cannot_open_is_refused_in_one_line(tmp_path: Path) -> None:
    """netcdf-c's ref_tst_xplatform2_2.nc (an attribute of a compound holding an array of a compound): netCDF4-python
    raises TypeError opening it; h5py finds it first and we name it in one line, exit 2, nothing written."""
    from tests.conftest import REPO

    src = REPO / "corpus" / "real" / "netcdf-c" / "outside" / "ref_tst_xplatform2_2.nc"
    with pytest.raises(TypeError, match="nested structured dtype arrays not supported"):
        netCDF4.Dataset(str(src))  # the peer's own limit, asserted so the test notices when it is lifted
    done = run_cli("--quiet", str(src), str(tmp_path / "out.file"))
    assert (done.returncode, done.stdout) == (2, "")
    nested = "compound holding an array of compounds: netCDF4-python cannot open a file holding it"
    assert done.stderr == (f"nc2nczarr: {src}: netCDF-4 cannot read, or the NCZarr model cannot hold: /:Runnymede "
                           f"({nested}), /date_1215 (named datatype: {nested}); --skip-unsupported converts the rest\n")
    assert not (tmp_path / "out.file").exists()
    # issue 23: --skip-unsupported converts the rest from a copy without them, each named
    done = run_cli("--quiet", "--skip-unsupported", str(src), str(tmp_path / "out.file"))
    assert done.returncode == 0, done.stderr
    copy = "(converted from a copy of the file without it)"
    types = "/cmp_t (named datatype compound: the NCZarr model keeps no type definitions)"
    assert done.stderr.splitlines() == [
        f"nc2nczarr: warning: {src}: /:Runnymede left out: {nested} {copy}",
        f"nc2nczarr: warning: {src}: /date_1215 left out: named datatype: {nested} {copy}",
        f"nc2nczarr: warning: {src}: left out, holding no variable's values: {types}",
    ]


#: netcdf-c reference files whose only user-defined type is a global attribute's → (where, type) as named
GLOBAL_ONLY = {
    "ref_tst_compounds4.nc": ("/:a1", "compound d"),
    "ref_tst_xplatform2_1.nc": ("/:We_will_sell_to_no_man_we_will_not_deny_or_defer_to_any_man_either_Justice_or_"
                                "Right", "vlen Magna_Carta_VLEN"),
}
#: the named datatypes netcdf-c committed in them (h5py lists them), named in one line since issue 23
COMMITTED = {"ref_tst_compounds4.nc": ("/c (named datatype compound", "/d (named datatype compound"),
             "ref_tst_xplatform2_1.nc": ("/cmp_t (named datatype compound", "/Magna_Carta_VLEN (named datatype vlen")}


@pytest.mark.parametrize("name", sorted(GLOBAL_ONLY))
def test_global_attribute_of_a_user_type(name: str, tmp_path: Path) -> None:
    """Refused in one line (netCDF4-python's own vlen warning kept off stderr); --skip-unsupported leaves out
    just that attribute and writes the rest (this file has no variable of a user type)."""
    from tests.conftest import REPO

    src = REPO / "corpus" / "real" / "netcdf-c" / "outside" / name
    where, kind = GLOBAL_ONLY[name]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"} | {"PYTHONPATH": str(REPO)}
    refused = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", "--quiet", str(src),
                              str(tmp_path / "no.file")], capture_output=True, text=True, timeout=120, env=env)
    assert (refused.returncode, refused.stderr) == (2, f"nc2nczarr: {src}: types outside the NCZarr model: "
                                                       f"{where} ({kind}); --skip-unsupported converts the rest\n")
    assert not (tmp_path / "no.file").exists()
    done = run_cli("--quiet", "--skip-unsupported", str(src), str(tmp_path / "out.file"))
    types = ", ".join(f"{t}: the NCZarr model keeps no type definitions)" for t in COMMITTED[name])
    expected = (f"nc2nczarr: warning: {src}: {where} left out: {kind} is outside the NCZarr model\n"
                f"nc2nczarr: warning: {src}: left out, holding no variable's values: {types}\n")
    assert (done.returncode, done.stderr) == (0, expected)
    with netCDF4.Dataset(f"file://{tmp_path / 'out.file'}#mode=nczarr,file") as nc:
        assert nc.ncattrs() == []
    checked = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.check", "--deep",
                              str(tmp_path / "out.file")],
                             capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert checked.returncode == 0, checked.stdout
