"""HDF5 inputs netCDF-4 hides, misreads or crashes on (issue 20, items 15, 16, 18, 19, 20).

Every HDF5 object netCDF-4 or the NCZarr model cannot hold is refused in one stderr line naming
each (exit 2, nothing written), or with ``--skip-unsupported`` left out with one warning line
each while the rest converts: never silently lost, never "unexpected … this is a bug", never a
crash. The files are made here with h5py (one odd object beside a plain ``/ok``), or are real
files from other writers in ``corpus/real/hdf5/`` (corpus/real/README.md). Expected values come
from the source: netCDF4-python's reading of it, or h5py's where netCDF4-python cannot open it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nczarr_conformance.cli.convert import main as nc2nczarr
from tests.in_process import run_main
from tests.test_convert_valid import PATHS, REPO, _values, nczarr_url, run_cli

netCDF4 = pytest.importorskip("netCDF4")
h5py = pytest.importorskip("h5py")

HDF5 = REPO / "corpus" / "real" / "hdf5"
OK = np.array([1.5, 2.5, 3.5, 4.5], dtype="f4")


@pytest.fixture
def convert(capfd: pytest.CaptureFixture[str]) -> Callable[..., subprocess.CompletedProcess[str]]:
    """nc2nczarr's main() in this process (tests/in_process.py): the tests that are about the process itself
    (a crash, a signal, stderr with Python's warnings on) run it with :func:`run_cli` instead."""
    return lambda *args: run_main(nc2nczarr, args, capfd)


# ---- files with one object netCDF-4 cannot hold -------------------------------------------------

def _array_attribute(obj: Any, name: str, base: Any, dims: tuple[int, ...], data: np.ndarray) -> None:
    """An attribute of HDF5 array type (h5py's high-level API expands those into a shape)."""
    tid = h5py.h5t.array_create(base, dims)
    aid = h5py.h5a.create(obj.id, name.encode(), tid, h5py.h5s.create(h5py.h5s.SCALAR))
    aid.write(np.ascontiguousarray(data), mtype=tid)


def _low_dataset(f: Any, name: str, tid: Any, data: np.ndarray | None = None, mtype: Any = None) -> None:
    did = h5py.h5d.create(f.id, name.encode(), tid, h5py.h5s.create_simple((2,)))
    if data is not None:
        did.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(data), mtype=mtype or tid)


def _float16_scale(f: Any) -> None:
    """A float16 coordinate of /ok's dimension (left out in a copy: /ok must lose the scale, not fail)."""
    x = f.create_dataset("x", data=np.arange(4, dtype="f2"), fillvalue=np.float16(-1))
    x.make_scale("x")
    f["ok"].dims[0].attach_scale(x)


#: kind → (what to add beside /ok, where it is named, what it is called)
KINDS: dict[str, tuple[Callable[[Any], None], str, str]] = {
    "float16 dataset": (lambda f: f.create_dataset("h", data=np.arange(4, dtype="f2")), "/h", "float16"),
    "float16 dataset with an HDF5 fill": (lambda f: f.create_dataset("h", (4,), dtype="f2", fillvalue=1.5),
                                          "/h", "float16 with an HDF5 fill value"),
    "long double dataset": (lambda f: f.create_dataset("q", data=np.arange(3, dtype=np.longdouble)), "/q",
                            "-bit float in 16 bytes"),
    "float16 attribute": (lambda f: f["ok"].attrs.create("h", np.float16(1.5)), "/ok:h", "float16"),
    "array attribute": (lambda f: _array_attribute(f["ok"], "arr", h5py.h5t.NATIVE_INT32, (3,),
                                                   np.arange(3, dtype="i4")), "/ok:arr", "array int32[3]"),
    "array root attribute": (lambda f: _array_attribute(f, "garr", h5py.h5t.NATIVE_DOUBLE, (2,), np.arange(2.)),
                             "/:garr", "array float64[2]"),
    "array dataset": (lambda f: _low_dataset(f, "a", h5py.h5t.array_create(h5py.h5t.NATIVE_INT32, (3,)),
                                             np.arange(6, dtype="i4").reshape(2, 3)), "/a", "array int32[3]"),
    "bitfield dataset": (lambda f: _low_dataset(f, "bits", h5py.h5t.STD_B8LE.copy(), np.array([1, 2], "u1"),
                                                h5py.h5t.NATIVE_UINT8), "/bits", "bitfield"),
    "reference dataset": (lambda f: f.create_dataset("r", data=[f["ok"].ref], dtype=h5py.ref_dtype), "/r",
                          "reference"),
    "reference attribute": (lambda f: f["ok"].attrs.create("r", f["ok"].ref), "/ok:r", "reference"),
    "compound with a float16 member": (lambda f: f.create_dataset("c", data=np.zeros(2, [("a", "f2"), ("b", "i4")])),
                                       "/c", "compound with a float16 member"),
    "boolean attribute": (lambda f: f["ok"].attrs.create("flag", True), "/ok:flag", "enum"),
    "zero-length attribute": (lambda f: f["ok"].attrs.create("empty", np.array([], "f4")), "/ok:empty",
                              "zero-length attribute"),
    "2-D attribute": (lambda f: f["ok"].attrs.create("grid", np.arange(6.).reshape(2, 3)), "/ok:grid",
                      "2-D attribute"),
    "fixed strings with an HDF5 fill": (lambda f: f.create_dataset("s", (2,), dtype="S4", fillvalue=b"ab"), "/s",
                                        "fixed-length string with an HDF5 fill value"),
    "null dataspace": (lambda f: f.create_dataset("n", data=h5py.Empty("f4")), "/n", "dataset with a null dataspace"),
    "float16 dimension scale with an HDF5 fill": (_float16_scale, "/x", "float16 with an HDF5 fill value"),
    "named float16 datatype": (lambda f: f.__setitem__("t16", np.dtype("f2")), "/t16", "named datatype float16"),
    "dangling soft link": (lambda f: f.__setitem__("gone", h5py.SoftLink("/nowhere")), "/gone",
                           "soft link to /nowhere that does not resolve"),
}


def _with(path: Path, add: Callable[[Any], None]) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with h5py.File(path, "w") as f:
            ok = f.create_dataset("ok", data=OK, chunks=(2,))
            ok.attrs["units"] = "m"
            add(f)
    return path


def _output(out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """netCDF4-python's view of the store: raw values and attributes of every variable."""
    values, attrs = {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with netCDF4.Dataset(nczarr_url(out)) as nc:
            def walk(group: Any, path: str) -> None:
                for name, var in group.variables.items():
                    key = f"{path.rstrip('/')}/{name}"
                    values[key] = _values(var)
                    attrs[key] = {a: var.getncattr(a) for a in var.ncattrs()}  # no _nczarr_maxstrlen (issue 34)
                for name, sub in group.groups.items():
                    walk(sub, f"{path.rstrip('/')}/{name}")
            walk(nc, "/")
    return values, attrs


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_what_netcdf4_cannot_hold_is_refused_or_skipped(kind: str, tmp_path: Path, convert: Any) -> None:
    """Refused in one line naming the object and its type (nothing written); with --skip-unsupported one
    warning naming it and /ok converted as the source holds it."""
    add, where, what = KINDS[kind]
    src = _with(tmp_path / "in.h5", add)
    out = tmp_path / "out.file"
    refused = convert("--quiet", str(src), str(out))
    assert refused.returncode == 2, refused.stderr
    assert len(refused.stderr.splitlines()) == 1 and "unexpected" not in refused.stderr
    assert refused.stderr.startswith(f"nc2nczarr: {src}: ") and f"{where} (" in refused.stderr
    assert what in refused.stderr.split(f"{where} (")[1]
    assert not out.exists()
    done = convert("--quiet", "--skip-unsupported", str(src), str(out))
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"nc2nczarr: warning: {src}: {where} left out: "), done.stderr
    assert what in lines[0]
    values, attrs = _output(out)
    assert values["/ok"].tobytes() == OK.tobytes()
    assert attrs["/ok"] == {"units": "m"}
    assert set(values) <= {"/ok"}  # nothing else left in (a hidden object was never there)


def test_float16_never_crashes_the_converter(tmp_path: Path) -> None:
    """Issue item 15: netCDF4-python shows a float16 dataset as a string variable; reading it aborted
    nc2nczarr (free(): invalid pointer / segfault). Refused before netCDF4-python opens the file, and
    the stderr is that one line even with Python's warnings on."""
    src = _with(tmp_path / "f16.h5", lambda f: f.create_dataset("h", (4,), dtype="f2", fillvalue=0.5))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "NCZARR_DEBUG")}
    done = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", str(src), str(tmp_path / "o")],
                          check=False, capture_output=True, text=True, timeout=120, env=env | {"PYTHONPATH": str(REPO)})
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"nc2nczarr: {src}: netCDF-4 cannot read, or the NCZarr model cannot hold: /h (float16 "
                           "with an HDF5 fill value: netcdf-c crashes on it); --skip-unsupported converts the rest\n")


def test_dump_refuses_float16_in_one_line(tmp_path: Path) -> None:
    """nczarr-dump reads a netCDF file through netCDF4-python too: it printed half a CDL and died with
    'unexpected UnicodeDecodeError'; now one line before any output."""
    src = _with(tmp_path / "f16.h5", lambda f: f.create_dataset("h", data=np.arange(4, dtype="f2")))
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore")
    done = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.dump", str(src)], check=False,
                          capture_output=True, text=True, timeout=120, env=env)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"nczarr-dump: {src}: netCDF-4 cannot read, or the NCZarr model cannot hold: /h "
                           "(float16: netCDF-4 has no such type)\n")


def test_non_standard_integer_width_converts(tmp_path: Path, convert: Any) -> None:
    """A 3-byte integer netCDF-4 reads as int32 (HDF5 converts it): it was 'unexpected TypeError: data type
    <i3 not understood' (the direct copy asked h5py for its dtype); now converted, values as netCDF4 reads."""
    def add(f: Any) -> None:
        t = h5py.h5t.STD_I32LE.copy()
        t.set_size(3)
        t.set_precision(24)
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((2,))
        did = h5py.h5d.create(f.id, b"i24", t, h5py.h5s.create_simple((4,)), dcpl=dcpl)
        did.write(h5py.h5s.ALL, h5py.h5s.ALL, np.array([1, -2, 70000, -70000], "i4"), mtype=h5py.h5t.NATIVE_INT32)

    src = _with(tmp_path / "i24.h5", add)
    for path in ([], ["--no-direct-copy"]):
        out = tmp_path / f"out{len(path)}.file"
        done = convert("--quiet", *path, str(src), str(out))
        assert (done.returncode, done.stderr) == (0, "")
        with netCDF4.Dataset(str(src)) as nc:
            expected = _values(nc["i24"])
        assert _output(out)[0]["/i24"].tolist() == expected.tolist() == [1, -2, 70000, -70000]


# ---- real files from other writers (corpus/real/hdf5) ---------------------------------------------

#: file → objects named in its refusal: (where, what)
REFUSED = {
    "pytables/float.h5": [("/float16", "float16"), ("/longdouble", "float in 16 bytes"),
                          ("/quadprecision", "float in 16 bytes")],
    "pytables/indexes_2_0.h5": [("/_i_table1/var1/sorted", "fixed-length string with an HDF5 fill value"),
                                ("/_i_table1/var2/sorted", "bitfield"), ("/table1", "compound")],
    "pytables/b2nd-no-chunkshape.h5": [("/data", "filter 32026 (blosc2)")],
    "pytables/time-table-vlarray-1_x.h5": [("/table", "compound with a time member"),
                                           ("/vlarray4", "vlen with a time member")],
    "written-here/anndata.h5ad": [("/var:column-order", "zero-length attribute"), ("/obs/cat:ordered", "enum")],
    "written-here/matlab73.mat": [("/i:Python.Shape", "zero-length attribute"),
                                  ("/s:Python.Shape", "zero-length attribute")],
}
#: file → the warnings a conversion gives (none but these: the rest converts as it is)
#: PyTables' CLASS attributes netCDF-4 hides are named in one line (issue 23; tests/test_nothing_dropped.py)
PYTABLES_CLASS = "left out, holding no variable's values: /:CLASS (attribute: a name netCDF-4 keeps to itself), "
CONVERTS = {
    "pytables/blosc_bigendian.h5": [PYTABLES_CLASS + "/i1:CLASS"],
    "pytables/test_szip.h5": ["/dset_szip: szip chunks are decoded through HDF5 and written with zlib level 4"],
    "nexusformat/chopper.nxs": [],
    "written-here/pytables_blosc.h5": [PYTABLES_CLASS + "/blosclz:CLASS"],
    "written-here/blosc_snappy.h5": ["/v: blosc snappy chunks are decoded through HDF5 and written with blosc lz4"],
}


def _source_values(src: Path, keys: list[str]) -> dict[str, np.ndarray]:
    """The source's values of ``keys``: through netCDF4-python, or through h5py when netcdf-c cannot
    open the file at all (it crashes on some of its objects)."""
    fatal = src.name in ("indexes_2_0.h5", "time-table-vlarray-1_x.h5")
    if fatal:
        with h5py.File(src, "r") as f:
            return {k: np.asarray(f[k][...]) for k in keys}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with netCDF4.Dataset(str(src)) as nc:
            return {k: _values(nc[k]) for k in keys}


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype.kind == "O" or b.dtype.kind == "O":
        return bool(a.tolist() == b.tolist())
    return a.shape == b.shape and a.astype(b.dtype).tobytes() == b.tobytes()


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_real_files_refused_in_one_line_or_the_rest_converted(name: str, tmp_path: Path, convert: Any) -> None:
    """Issue item 18: a segfault (indexes_2_0.h5, exit -11), "unexpected RuntimeError: NetCDF: Filter error"
    even under --skip-unsupported (b2nd), "unexpected ValueError: an attribute is a vector of length >= 1"
    (anndata, MATLAB v7.3), a crash on float16 (float.h5). The refusal runs in a process of its own (the
    crashes were there); the conversion of the rest, an error line before, in this one."""
    src = HDF5 / name
    out = tmp_path / "out.file"
    refused = run_cli("--quiet", str(src), str(out))
    assert refused.returncode == 2, refused.stderr
    assert len(refused.stderr.splitlines()) == 1 and "unexpected" not in refused.stderr
    for where, what in REFUSED[name]:
        assert f"{where} (" in refused.stderr and what in refused.stderr.split(f"{where} (")[1], where
    assert not out.exists()
    done = convert("--quiet", "--skip-unsupported", str(src), str(out))
    assert done.returncode == 0, done.stderr
    assert all(line.startswith(f"nc2nczarr: warning: {src}: ") for line in done.stderr.splitlines())
    for where, _ in REFUSED[name]:
        assert f"{src}: {where} left out: " in done.stderr
    values, _ = _output(out)
    expected = _source_values(src, sorted(values))
    assert [k for k in values if not _same(expected[k], values[k])] == []


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", sorted(CONVERTS))
def test_real_files_convert_with_values_equal(name: str, path: list[str], tmp_path: Path, convert: Any) -> None:
    """blosclz was mapped to a cname numcodecs does not know ('lz': "unexpected ValueError"), snappy too;
    szip was refused; the rest converted before and still does. Values as netCDF4-python reads the source."""
    src = HDF5 / name
    out = tmp_path / "out.file"
    done = convert("--quiet", *path, str(src), str(out))
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == len(CONVERTS[name])
    for line, text in zip(lines, CONVERTS[name], strict=True):
        assert line.startswith(f"nc2nczarr: warning: {src}: {text}")
    values, attrs = _output(out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with netCDF4.Dataset(str(src)) as nc:
            source = {}

            def walk(group: Any, gpath: str) -> None:
                for vname, var in group.variables.items():
                    attrs = {a: var.getncattr(a) for a in var.ncattrs()}
                    source[f"{gpath.rstrip('/')}/{vname}"] = (_values(var), attrs)
                for sname, sub in group.groups.items():
                    walk(sub, f"{gpath.rstrip('/')}/{sname}")
            walk(nc, "/")
    assert sorted(values) == sorted(source)
    assert [k for k in source if not _same(source[k][0], values[k])] == []
    assert {k: repr(a) for k, (_, a) in source.items()} == {k: repr(a) for k, a in attrs.items()}


def test_blosc_compressor_names_map_to_numcodecs(tmp_path: Path, convert: Any) -> None:
    """The HDF5 blosc filter's compressor codes, as netCDF4-python names them, become numcodecs' cnames."""
    out = tmp_path / "out.file"
    assert convert("--quiet", "--no-direct-copy", str(HDF5 / "written-here" / "pytables_blosc.h5"),
                   str(out)).returncode == 0
    assert json.loads((out / "blosclz" / ".zarray").read_text())["compressor"]["cname"] == "blosclz"
    assert json.loads((out / "lz4hc" / ".zarray").read_text())["compressor"]["cname"] == "lz4hc"


# ---- szip (item 19) ---------------------------------------------------------------------------------

def _szip(tmp_path: Path) -> Path:
    if not h5py.h5z.filter_avail(h5py.h5z.FILTER_SZIP):
        pytest.skip("this h5py's HDF5 has no szip encoder")
    path = tmp_path / "szip.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("v", data=np.arange(400, dtype="i4").reshape(20, 20), chunks=(10, 10),
                         compression="szip", compression_opts=("nn", 16))
    return path


@pytest.mark.parametrize("path", PATHS)
def test_szip_is_decoded_and_rewritten_with_zlib(path: list[str], tmp_path: Path) -> None:
    """Was refused ("codec 'szip' is not available in numcodecs"); HDF5 decodes it: written with zlib level 4,
    one warning line saying so, values as netCDF4-python reads the source. (A real process: the exact stderr of a
    conversion that warns.)"""
    src = _szip(tmp_path)
    out = tmp_path / "out.file"
    done = run_cli("--quiet", *path, str(src), str(out))
    assert done.returncode == 0, done.stderr
    assert done.stderr == (f"nc2nczarr: warning: {src}: /v: szip chunks are decoded through HDF5 and written with zlib "
                           "level 4 (numcodecs has no szip codec; --compressor chooses another)\n")
    assert json.loads((out / "v" / ".zarray").read_text())["compressor"] == {"id": "zlib", "level": 4}
    with netCDF4.Dataset(str(src)) as nc:
        assert nc["v"].filters()["szip"]  # the peer saw szip, and reads it:
        expected = _values(nc["v"])
    assert _output(out)[0]["/v"].tobytes() == expected.tobytes()


def test_szip_with_a_compressor_chosen_says_nothing(tmp_path: Path, convert: Any) -> None:
    src = _szip(tmp_path)
    out = tmp_path / "out.file"
    done = convert("--quiet", "--compressor", "zstd:3", str(src), str(out))
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads((out / "v" / ".zarray").read_text())["compressor"]["id"] == "zstd"


# ---- HDF5 fill values (item 20) -------------------------------------------------------------------

#: case → (dtype, h5py fillvalue or None, _FillValue attribute or None)
FILLS = {
    "h5py default fill, uint8": ("u1", None, None),
    "fillvalue=7, uint8": ("u1", 7, None),
    "fillvalue=-1.5, float32": ("f4", -1.5, None),
    "fillvalue=3 and a _FillValue of -9": ("i2", 3, -9),
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", sorted(FILLS))
def test_unwritten_chunks_read_as_the_source_reads_them(case: str, path: list[str], tmp_path: Path,
                                                        convert: Any) -> None:
    """A chunk never written reads, through netCDF4-python and through our xarray engine, as netCDF4-python
    reads it from the source (the HDF5 fill value), and the store reports the fill the source reports.
    Before: fill_value null or netCDF's default, read back as 255 where the source reads 0 or 7."""
    xr = pytest.importorskip("xarray")
    dtype, fill, attr = FILLS[case]
    src = tmp_path / "fill.h5"
    with h5py.File(src, "w") as f:
        d = f.create_dataset("v", shape=(8,), dtype=dtype, chunks=(4,), **({} if fill is None else {"fillvalue": fill}))
        d[:4] = np.arange(4)  # the second chunk is never written
        if attr is not None:
            d.attrs["_FillValue"] = np.array(attr, dtype=dtype)
    out = tmp_path / "out.file"
    done = convert("--quiet", *path, str(src), str(out))
    assert (done.returncode, done.stderr) == (0, "")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with netCDF4.Dataset(str(src)) as a, netCDF4.Dataset(nczarr_url(out)) as b:
            expected, fill_reported = _values(a["v"]), repr(a["v"].get_fill_value())
            assert _values(b["v"]).tobytes() == expected.tobytes()
            assert repr(b["v"].get_fill_value()) == fill_reported
        engine = xr.open_dataset(str(out), engine="nczarr", mask_and_scale=False)
        assert engine["v"].values.tobytes() == expected.tobytes()
    assert expected.tolist()[4:] == [fill or 0] * 4  # the HDF5 fill, as HDF5 reads it


# ---- --append refuses what netCDF-4 would hide ----------------------------------------------------

def test_append_refuses_an_object_netcdf4_hides(tmp_path: Path, convert: Any) -> None:
    """An append has no --skip-unsupported: an array-typed attribute netCDF-4 hides was appended without it,
    silently; now refused in one line, the store untouched."""
    def make(path: Path, t0: int) -> Path:
        with netCDF4.Dataset(str(path), "w") as nc:
            nc.createDimension("time", None)
            t = nc.createVariable("time", "f8", ("time",))
            t[:] = np.arange(t0, t0 + 3, dtype="f8")
        return path

    first, second = make(tmp_path / "a.nc", 0), make(tmp_path / "b.nc", 3)
    with h5py.File(second, "a") as f:
        _array_attribute(f["time"], "arr", h5py.h5t.NATIVE_INT32, (3,), np.arange(3, dtype="i4"))
    store = tmp_path / "s.file"
    assert convert("--quiet", str(first), str(store)).returncode == 0
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    done = convert("--quiet", "--append", "time", str(second), str(store))
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1 and "/time:arr (array int32[3]" in done.stderr
    assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == before


# ---- what sources/hdf5_types.py relies on and promises ------------------------------------------------------

def test_netcdf_c_crashes_closing_fixed_strings_with_an_hdf5_fill_even_unread(tmp_path: Path) -> None:
    """The peer behaviour behind refusing such datasets (sources/hdf5_types.py): netcdf-c 4.10.1 segfaults in
    nc_close on a fixed-length string dataset with an HDF5 fill value, though no value was read. When a
    netcdf-c release stops crashing, this fails: the refusal can then become a conversion."""
    src = _with(tmp_path / "s.h5", KINDS["fixed strings with an HDF5 fill"][0])
    done = subprocess.run([sys.executable, "-c", "import sys, netCDF4; netCDF4.Dataset(sys.argv[1]).close()", str(src)],
                          check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode < 0, (done.returncode, done.stderr)  # killed by a signal (SIGSEGV here)


def test_unwritten_value_is_what_hdf5_reads_which_netcdf_c_does_not_always_report(tmp_path: Path) -> None:
    """hdf5_types.unwritten_value: HDF5's fill (zero unless the writer set one) for storage never written, None
    when the fill time is NEVER (the bytes are then undefined). netcdf-c reports the default one as NOFILL
    (None), not as the 0 it reads. Expected values: h5py's and netCDF4-python's readings of the file."""
    from nczarr_conformance.sources.hdf5_types import unwritten_value

    src = tmp_path / "fills.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("default", (8,), "u1", chunks=(4,))[:4] = 1
        f.create_dataset("set", (8,), "u1", chunks=(4,), fillvalue=7)[:4] = 1
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((4,))
        dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
        h5py.h5d.create(f.id, b"never", h5py.h5t.NATIVE_UINT8, h5py.h5s.create_simple((8,)), dcpl=dcpl)
    with h5py.File(src, "r") as f:
        assert f["default"][4:].tolist() == [0] * 4 and f["set"][4:].tolist() == [7] * 4
        assert (unwritten_value(f["default"]), unwritten_value(f["set"]), unwritten_value(f["never"])) == (0, 7, None)
    with netCDF4.Dataset(str(src)) as nc:
        assert nc["default"].get_fill_value() is None and nc["set"].get_fill_value() == 7


def test_is_hdf5_never_opens_what_is_not_a_regular_file(tmp_path: Path) -> None:
    """hdf5_types.is_hdf5 on a FIFO: False at once (opening it would wait for a writer that never comes)."""
    fifo = tmp_path / "in.h5"
    os.mkfifo(fifo)
    code = "import sys; from nczarr_conformance.sources.hdf5_types import is_hdf5; print(is_hdf5(sys.argv[1]))"
    done = subprocess.run([sys.executable, "-c", code, str(fifo)], check=False, capture_output=True, text=True,
                          timeout=20, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert (done.returncode, done.stdout) == (0, "False\n"), done.stderr


def test_scan_reads_types_and_dataspaces_never_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """hdf5_types.scan reads no dataset's values: every byte h5py reads of the file is recorded, and at most a
    header's speculative read (HDF5 reads 512 bytes ahead) touches the 8.5 MiB of data; reading one
    dataset's values touches all of its 8 MiB."""
    import io

    from nczarr_conformance.sources import hdf5_types

    src = tmp_path / "big.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("contiguous", data=np.arange(2**20, dtype="f8")).attrs["a"] = np.arange(10.0)
        f.create_dataset("chunked", data=np.arange(2**16, dtype="i4").reshape(256, 256), chunks=(64, 64))
        f.create_dataset("h", data=np.arange(2**17, dtype="f2"))  # float16: a finding
    extents: list[tuple[int, int]] = []
    with h5py.File(src, "r") as f:
        for name in ("contiguous", "h"):
            extents.append((f[name].id.get_offset(), f[name].id.get_storage_size()))
        chunked = f["chunked"].id
        extents += [(info.byte_offset, info.size) for info in
                    (chunked.get_chunk_info(i) for i in range(chunked.get_num_chunks()))]
    reads: list[tuple[int, int]] = []

    class Recorded(io.FileIO):
        def readinto(self, buffer: Any) -> int | None:
            start, n = self.tell(), super().readinto(buffer)
            reads.append((start, n or 0))
            return n

    real = h5py.File
    monkeypatch.setattr(h5py, "File", lambda path, mode="r", **kw: real(Recorded(path, "rb"), mode, **kw))

    def data_bytes_read() -> int:
        return sum(max(0, min(s + n, o + size) - max(s, o)) for s, n in reads for o, size in extents)

    found = hdf5_types.scan(str(src))
    assert [(x.where, x.what) for x in found.findings] == [("/h", "float16")]
    assert reads and data_bytes_read() <= 4096, data_bytes_read()
    reads.clear()
    with h5py.File(str(src), "r") as f:
        f["contiguous"][...]
    assert data_bytes_read() >= 8 * 2**20  # the recording sees a value read


def test_blosc_snappy_is_rewritten_as_lz4_at_the_sources_level_and_shuffle(tmp_path: Path, convert: Any) -> None:
    """transforms.writable_codecs: numcodecs' blosc has no snappy, so such a variable is written with blosc lz4,
    its level and shuffle kept. Expected: the source's HDF5 blosc filter parameters, read with h5py
    (cd_values: …, level, shuffle, compressor code: 3 is snappy)."""
    src = HDF5 / "written-here" / "blosc_snappy.h5"
    with h5py.File(src, "r") as f:
        params = f["v"]._filters["32001"]
    assert params[6] == 3
    out = tmp_path / "out.file"
    done = convert("--quiet", str(src), str(out))
    assert done.returncode == 0, done.stderr
    compressor = json.loads((out / "v" / ".zarray").read_text())["compressor"]
    assert (compressor["id"], compressor["cname"], compressor["clevel"], compressor["shuffle"]) == \
        ("blosc", "lz4", params[4], params[5])
