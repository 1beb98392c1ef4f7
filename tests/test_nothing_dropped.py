"""Nothing in an HDF5 input is dropped without a word (issue 23, "Nothing dropped without a word").

Whatever h5py sees in the source and the converted store does not hold is named: in one warning
line when it holds no variable's values (a named datatype, an attribute of a name netCDF-4 or NCZarr
keeps to itself, an attribute of a dimension-only scale), or refused in one line (with
``--skip-unsupported``: one warning line each) when it does.

The expected names come from h5py and netCDF4-python, never from the code under test: h5py lists
every group, dataset, named datatype and attribute of the source; netCDF4-python (netcdf-c) lists
what the store holds; the difference, less what is inside an object already named, is what stderr
must name. Bookkeeping attributes are not objects: they encode what the store holds another way
(netCDF-4 format specification, "Reserved attributes"; HDF5 Dimension Scale specification).
"""
from __future__ import annotations

import re
import subprocess
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import REPO, require_module, require_tool
from tests.test_convert_valid import nczarr_url, run_cli, run_in_process

netCDF4 = require_module("netCDF4")
h5py = require_module("h5py")

#: netCDF-4's own attributes (format specification, "Reserved attributes"): dimension ids, the classic-model
#: flag, provenance, and netcdf-c 4.9's codec list; the store says all of these its own way
NETCDF4_RESERVED = {"_Netcdf4Dimid", "_Netcdf4Coordinates", "_nc3_strict", "_NCProperties", "_Codecs"}
#: what netCDF-4 names a scale that is a dimension only (netCDF-4 format specification)
DIMENSION_ONLY = b"This is a netCDF dimension but not a netCDF variable"
#: netCDF-4 stores a variable named like a dimension it does not index under this prefix
NON_COORD = "_nc4_non_coord_"


# ---- what h5py sees, what the store holds ------------------------------------------------------------------

def _is_scale(obj: Any) -> bool:
    value = obj.attrs.get("CLASS") if isinstance(obj, h5py.Dataset) and "CLASS" in obj.attrs else None
    return bool(value is not None and bytes(np.asarray(value)).rstrip(b"\0") == b"DIMENSION_SCALE")


def _bookkeeping(obj: Any, name: str) -> bool:
    """An attribute that encodes dimensions (HDF5 dimension scales) or netCDF-4's own books."""
    if name in NETCDF4_RESERVED or name == "DIMENSION_LIST":
        return True
    return name in ("CLASS", "NAME", "REFERENCE_LIST") and _is_scale(obj)


def _dimension_only(obj: Any) -> bool:
    return _is_scale(obj) and bytes(np.asarray(obj.attrs.get("NAME", b""))).startswith(DIMENSION_ONLY)


def h5py_objects(path: Path) -> dict[str, str]:
    """Every group, dataset, named datatype and attribute h5py sees (``/g/v``, ``/g/v:attr``, ``/:attr``) → kind."""
    if not h5py.is_hdf5(str(path)):
        return {}  # netCDF-3: no HDF5 object to lose
    found: dict[str, str] = {}
    seen: set[Any] = set()

    def attributes(obj: Any, where: str) -> None:
        for name in obj.attrs:
            if not _bookkeeping(obj, name):
                found[f"{where}:{name}"] = "attribute"

    def walk(group: Any, where: str) -> None:
        attributes(group, where)
        for name in group:
            child = f"{where.rstrip('/')}/{name}"
            try:
                obj = group[name]
            except (KeyError, OSError):
                found[child] = "unresolved link"
                continue
            if isinstance(obj, h5py.Group):
                if obj.id in seen:
                    continue
                seen.add(obj.id)
                found[child] = "group"
                walk(obj, child)
            elif isinstance(obj, h5py.Datatype):
                found[child] = "named datatype"
            else:
                found[child] = "dimension" if _dimension_only(obj) else "dataset"
                attributes(obj, child)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with h5py.File(path, "r") as f:
            walk(f, "/")
    return found


def store_objects(out: Path) -> set[str]:
    """Groups, variables, dimensions (``/g/x#dim``) and attributes netCDF4-python reads from the store."""
    held: set[str] = set()

    def walk(group: Any, where: str) -> None:
        held.update(f"{where}:{a}" for a in group.ncattrs())
        held.update(f"{where.rstrip('/')}/{d}#dim" for d in group.dimensions)
        for name, var in group.variables.items():
            held.add(f"{where.rstrip('/')}/{name}")
            held.update(f"{where.rstrip('/')}/{name}:{a}" for a in var.ncattrs())  # no _nczarr_maxstrlen (issue 34)
        for name, sub in group.groups.items():
            held.add(f"{where.rstrip('/')}/{name}")
            walk(sub, f"{where.rstrip('/')}/{name}")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with netCDF4.Dataset(nczarr_url(out)) as nc:
            walk(nc, "/")
    return held


def _netcdf_name(where: str) -> str:
    """``/_nc4_non_coord_y:units`` → ``/y:units`` (netCDF-4's name for that dataset)."""
    path, colon, attr = where.partition(":")
    parent, _, name = path.rpartition("/")
    return f"{parent}/{name.removeprefix(NON_COORD)}{colon}{attr}"


def expected_named(objects: dict[str, str], held: set[str]) -> set[str]:
    """What h5py sees and the store lacks, less what lies inside an object already in that set."""
    missing = set()
    for where, kind in objects.items():
        names = {f"{where}#dim"} if kind == "dimension" else {where, _netcdf_name(where)}
        if not names & held:
            missing.add(where)
    owners = {w for w in missing if objects[w] != "attribute"}
    return {w for w in missing
            if not any(w != o and w.startswith((o + "/", o + ":")) for o in owners)}


# ---- what stderr names -----------------------------------------------------------------------------------

def named_in(stderr: str, src: Path) -> set[str]:
    """Objects the warnings name: ``SRC: /x left out: …`` lines, and the items of the one ``SRC: left out, …:`` line."""
    names: set[str] = set()
    lead = f"nc2nczarr: warning: {src}: "
    for line in stderr.splitlines():
        assert line.startswith(lead), line  # nothing but warnings about this source
        body = line[len(lead):]
        if body.startswith("left out, holding no variable's values: "):
            items = re.split(r", (?=/)", body.split(": ", 1)[1])
            names.update(item.partition(" (")[0] for item in items)
        elif " left out: " in body:
            names.add(body.split(" left out: ")[0])
    return names


def refused_names(line: str, src: Path) -> set[str]:
    """The objects one refusal line lists (``SRC: lead: /a (…), /b (…); --skip-unsupported converts the rest``)."""
    listed = line.removeprefix(f"nc2nczarr: {src}: ").rsplit("; --skip-unsupported", 1)[0]
    listed = re.split(r": (?=/)", listed, maxsplit=1)[1]
    return {item.partition(" (")[0] for item in re.split(r", (?=/)", listed)}


def assert_each_dropped_object_named(src: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Converts ``src``; a refusal is one line and --skip-unsupported then names each object; the named
    set is exactly h5py's objects minus the store's.

    The conversions run in this process (``run_in_process``: the exit code and stderr a process gives, which
    ``test_convert_valid.py::test_the_command_in_a_process_says_what_main_says`` holds equal); ``HIDDEN``'s
    cases start the command."""
    out = tmp_path / "out.file"
    done = run_in_process(capfd, "--quiet", str(src), str(out))
    if done.returncode == 2:  # values the store would not hold: refused, in one line, nothing written
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"nc2nczarr: {src}: "), done.stderr
        assert not out.exists()
        refused = refused_names(lines[0], src)
        done = run_in_process(capfd, "--quiet", "--skip-unsupported", str(src), str(out))
        per_object = {line.split(": ", 3)[3].split(" left out: ")[0] for line in done.stderr.splitlines()
                      if " left out: " in line}
        assert refused <= per_object, (refused, per_object)
    assert done.returncode == 0, done.stderr
    assert named_in(done.stderr, src) == expected_named(h5py_objects(src), store_objects(out))


# ---- the real files ---------------------------------------------------------------------------------------

REAL = sorted(p for p in (REPO / "corpus" / "real").rglob("*")
              if p.is_file() and p.name not in ("LICENSE", "README.md"))
NETCDF_C_BINARY = sorted((REPO / "corpus" / "netcdf-c").rglob("*.h5"))
NETCDF_C_CDL = sorted((REPO / "corpus" / "netcdf-c").rglob("*.cdl"))
#: CDL ncgen cannot build: netcdf-c's own templates, not datasets
NOT_CDL = {"ref_any.cdl": "a template: '@…@' placeholders", "ref_byte.cdl": "a variable named 'byte', a CDL keyword"}


@pytest.mark.parametrize("src", REAL + NETCDF_C_BINARY, ids=lambda p: str(p.relative_to(REPO / "corpus")))
def test_every_real_file_converts_naming_each_dropped_object(src: Path, tmp_path: Path,
                                                            capfd: pytest.CaptureFixture[str]) -> None:
    assert_each_dropped_object_named(src, tmp_path, capfd)


@pytest.mark.parametrize("cdl", NETCDF_C_CDL, ids=lambda p: str(p.relative_to(REPO / "corpus")))
def test_every_netcdf_c_reference_cdl_converts_naming_each_dropped_object(cdl: Path, tmp_path: Path,
                                                                         capfd: pytest.CaptureFixture[str]) -> None:
    """netcdf-c's reference CDL made into netCDF-4 by ncgen (netcdf-c writes the HDF5)."""
    ncgen = require_tool("ncgen")
    src = tmp_path / (cdl.stem + ".nc")
    made = subprocess.run([ncgen, "-k", "nc4", "-o", str(src), str(cdl)], capture_output=True, text=True,
                          timeout=60, check=False)
    if cdl.name in NOT_CDL:
        assert made.returncode != 0, f"ncgen builds {cdl.name} now: take it out of NOT_CDL"
        return
    assert made.returncode == 0, made.stderr
    assert_each_dropped_object_named(src, tmp_path, capfd)


# ---- one object of each kind netCDF-4 hides without a word -------------------------------------------------

def _ok(f: Any) -> None:
    ok = f.create_dataset("ok", data=np.arange(4, dtype="f4"))
    ok.attrs["units"] = "m"


def _dimension_only_scale_attribute(path: Path) -> None:
    with netCDF4.Dataset(str(path), "w") as nc:
        nc.createDimension("x", 4)
        nc.createVariable("ok", "f4", ("x",))[:] = np.arange(4)
    with h5py.File(path, "a") as f:
        f["x"].attrs["units"] = "m"  # on a scale netCDF-4 shows as the dimension x only


def _ecmwf_style(path: Path) -> None:
    """The layout of a CDS ERA5 netCDF file (valid_time, latitude, longitude, number, string expver, t2m),
    written with h5py as HDF5 writers do, its string type committed once (``expver_t``) and shared."""
    with h5py.File(path, "w") as f:
        f["expver_t"] = h5py.string_dtype()
        scales = {}
        for name, values in (("valid_time", np.arange(4, dtype="i8") * 3600), ("latitude", np.array([90., 89.75])),
                             ("longitude", np.array([0., .25, .5]))):
            scales[name] = f.create_dataset(name, data=values)
            scales[name].make_scale(name)
        scales["valid_time"].attrs["units"] = "seconds since 1970-01-01"
        f.create_dataset("number", data=np.int64(0)).attrs["long_name"] = "ensemble member numerical id"
        expver = f.create_dataset("expver", data=np.array(["0001", "0001", "0005", "0005"], dtype=object),
                                  dtype=f["expver_t"])
        expver.attrs["long_name"] = "experiment version"
        expver.dims[0].attach_scale(scales["valid_time"])
        t2m = f.create_dataset("t2m", data=np.arange(24, dtype="f4").reshape(4, 2, 3), compression="gzip")
        for i, name in enumerate(("valid_time", "latitude", "longitude")):
            t2m.dims[i].attach_scale(scales[name])
        t2m.attrs["GRIB_paramId"] = np.int64(167)
        f.attrs["GRIB_centre"] = "ecmf"
        f.attrs["Conventions"] = "CF-1.7"


def _with(path: Path, add: Any) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with h5py.File(path, "w") as f:
            _ok(f)
            add(f)
    return path


#: kind → (make the file, the names the one warning line must give)
HIDDEN = {
    "named string datatype": (lambda p: _with(p, lambda f: f.__setitem__("str_t", h5py.string_dtype())), {"/str_t"}),
    "named fixed-string datatype": (lambda p: _with(p, lambda f: f.__setitem__("s4_t", np.dtype("S4"))), {"/s4_t"}),
    "named compound datatype": (lambda p: _with(p, lambda f: f.__setitem__("c_t", np.dtype([("a", "i4")]))),
                                {"/c_t"}),
    "PyTables CLASS attributes": (
        lambda p: _with(p, lambda f: (f.attrs.__setitem__("CLASS", np.bytes_(b"GROUP")),
                                      f["ok"].attrs.__setitem__("CLASS", np.bytes_(b"ARRAY")))),
        {"/:CLASS", "/ok:CLASS"}),
    "NAME and REFERENCE_LIST on a dataset that is no scale": (
        lambda p: _with(p, lambda f: (f["ok"].attrs.__setitem__("NAME", "mine"),
                                      f["ok"].attrs.__setitem__("REFERENCE_LIST", np.int32(1)))),
        {"/ok:NAME", "/ok:REFERENCE_LIST"}),
    "NCZarr's attribute names": (lambda p: _with(p, lambda f: (f.attrs.__setitem__("_nczarr_default_maxstrlen", 6),
                                                               f["ok"].attrs.__setitem__("_nczarr_x", 1))),
                                 {"/:_nczarr_default_maxstrlen", "/ok:_nczarr_x"}),
    "attribute of a dimension-only scale": (_dimension_only_scale_attribute, {"/x:units"}),
    "ECMWF-style file with a committed string type": (_ecmwf_style, {"/expver_t"}),
}


@pytest.mark.parametrize("kind", sorted(HIDDEN))
def test_what_netcdf4_hides_is_named_in_one_warning_line(kind: str, tmp_path: Path) -> None:
    """Converted (exit 0) with one warning line naming each object, and everything else in the store."""
    make, names = HIDDEN[kind]
    src = tmp_path / "in.h5"
    make(src)
    out = tmp_path / "out.file"
    done = run_cli("--quiet", str(src), str(out))
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"nc2nczarr: warning: {src}: left out, "), done.stderr
    assert named_in(done.stderr, src) == names
    assert expected_named(h5py_objects(src), store_objects(out)) == names  # the peers agree: h5py minus netcdf-c


def test_ecmwf_style_expver_strings_reach_the_store(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The vlen string variable itself (``expver``) is converted with its values, through netcdf-c's eyes."""
    src = tmp_path / "era5.nc"
    _ecmwf_style(src)
    out = tmp_path / "out.file"
    assert run_in_process(capfd, "--quiet", str(src), str(out)).returncode == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with netCDF4.Dataset(nczarr_url(out)) as nc:
            assert nc["expver"][:].tolist() == ["0001", "0001", "0005", "0005"]
            assert nc["expver"].dimensions == ("valid_time",)
            assert nc["expver"].long_name == "experiment version"
            assert nc["t2m"][:].tolist() == np.arange(24, dtype="f4").reshape(4, 2, 3).tolist()


def test_a_dataset_netcdf4_did_not_show_is_refused(tmp_path: Path) -> None:
    """What no rule foresaw netCDF-4 hiding (here: a model read without /gone) holds values: refused,
    not noted (unit level: the CLI has no such file to show, netcdf-c 4.10.1 hides nothing else here)."""
    from nczarr_conformance.model import Attribute, Group, Variable
    from nczarr_conformance.sources import hdf5_types

    src = _with(tmp_path / "in.h5", lambda f: f.create_dataset("gone", data=np.arange(3)))
    found = hdf5_types.scan(str(src))
    root = Group()
    root.variables["ok"] = Variable("float", ["/phony_dim_0"], (4,), {"units": Attribute("char", "m")})
    missing = hdf5_types.unseen(found, root, [])
    assert [(f.where, f.noted) for f in missing] == [("/gone", False)]
