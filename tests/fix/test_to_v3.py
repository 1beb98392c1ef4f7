"""``nczarr-fix --to-v3`` (issue #25, Migrate): a v2 store's metadata rewritten as Zarr v3, chunks untouched.

Expected values come from the peers: netCDF4-python (netcdf-c 4.10.1) reads the original v2 store,
zarr-python 3.1.6 and xarray (engine zarr) read the migrated one, and the metadata is compared with
what zarr-python's own migration (``zarr migrate v3``: ``zarr.metadata.migrate_v3.migrate_v2_to_v3``,
the function its CLI calls; the CLI itself needs ``typer``, not installed) writes for the same store.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nczarr_conformance.cli.convert import main as nc2nczarr_main
from nczarr_conformance.cli.fix import main as fix_main
from nczarr_conformance.model import Attribute, Dataset, Dimension, Group, Variable
from tests.fix.helpers import c410, nc_read, url
from tests.in_process import run_main

pytestmark = pytest.mark.peer

V2_NAMES = {".zarray", ".zattrs", ".zgroup", ".zmetadata"}


def cli(*args: str, preexec: Any = None) -> subprocess.CompletedProcess[str]:
    """nczarr-fix in a process of its own: the tests of a kill, of a file-size limit and one per exit code."""
    return subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.fix", *args], capture_output=True, text=True,
                          check=False, timeout=180, preexec_fn=preexec,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})


@pytest.fixture
def nczarr_fix(capfd: pytest.CaptureFixture[str]) -> Any:
    """nczarr-fix's main() in this process (tests/in_process.py); its netcdf-c child (fix/verify.py) is started
    once and kept, as it is for a process's later fixes."""
    return lambda *args: run_main(fix_main, args, capfd)


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ---- what the stores hold -------------------------------------------------------------------------------
def files(root: Path) -> dict[str, bytes]:
    """Every file of a directory store (a zip: every member) by its key."""
    if root.is_file():
        with zipfile.ZipFile(root) as zf:
            return {i.filename: zf.read(i) for i in zf.infolist() if not i.is_dir()}
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def chunks(root: Path) -> dict[str, tuple[str, int | None]]:
    """Every chunk object: its SHA-256 and (a directory store) its inode, so "untouched" means not rewritten."""
    out: dict[str, tuple[str, int | None]] = {}
    for key, data in files(root).items():
        name = key.rsplit("/", 1)[-1]
        if name in V2_NAMES or name == "zarr.json":
            continue
        inode = None if root.is_file() else (root / key).stat().st_ino
        out[key] = (hashlib.sha256(data).hexdigest(), inode)
    return out


def _text(values: Any) -> np.ndarray:
    """Values comparable across readers: flat; text as str without trailing NULs (bytes or str alike)."""
    arr = np.asarray(values).ravel()
    if arr.dtype.kind in "SUO":
        return np.array([v.decode("utf-8").rstrip("\x00") if isinstance(v, bytes) else str(v).rstrip("\x00")
                         for v in arr.tolist()], dtype=object)
    return arr


def assert_same(expected: dict[str, Any], got: dict[str, Any], who: str) -> None:
    assert sorted(got) == sorted(expected), f"{who}: arrays {sorted(got)} != {sorted(expected)}"
    for name, want in expected.items():
        a, b = _text(want), _text(got[name])
        assert a.shape == b.shape and (
            a.tolist() == b.tolist() if a.dtype.kind == "O" else np.array_equal(a, b, equal_nan=a.dtype.kind == "f")), \
            f"{who} reads {name} as {b.tolist()}, netCDF4-python read {a.tolist()} from the original"


def netcdf_c_values(path: Path, mode: str = "nczarr") -> dict[str, Any]:
    """netCDF4-python's reading of the original v2 store: array path → values."""
    out = {}
    for gkey, group in nc_read(path, mode).root.walk():
        for name, var in group.variables.items():
            out[f"{gkey.strip('/')}/{name}".lstrip("/")] = var.data
    return out


def zarr_python_values(path: Path) -> dict[str, Any]:
    import zarr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store: Any = zarr.storage.ZipStore(path, mode="r") if path.is_file() else str(path)
        group = zarr.open_group(store, mode="r", zarr_format=3)
        return {name: arr[...] for name, arr in group.arrays()} | {
            f"{gname}/{name}": arr[...] for gname, sub in group.groups() for name, arr in sub.arrays()}


def xarray_values(path: Path) -> dict[str, Any]:
    import xarray as xr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = xr.open_datatree(str(path), engine="zarr", zarr_format=3, decode_cf=False)
        return {f"{node.path.strip('/')}/{name}".lstrip("/"): var.values
                for node in tree.subtree for name, var in node.ds.data_vars.items()}


def our_model(path: Path) -> Dataset:
    from nczarr_conformance.stores import open_store
    from nczarr_conformance.urls import parse
    from nczarr_conformance.zarr3.reader import read_any

    with open_store(parse(str(path))) as store:
        return read_any(store)


def v3_docs(root: Path) -> dict[str, Any]:
    return {k: json.loads(v) for k, v in files(root).items() if k.rsplit("/", 1)[-1] == "zarr.json"}


# ---- the stores -------------------------------------------------------------------------------------------
def netcdf_c_store(path: Path) -> Path:
    """netcdf-c 4.10.1's store (netCDF4-python, mode=nczarr,file) with every kind --to-v3 maps: one-byte
    integers (<i1), shuffle + zlib, char (>S1, rows never written), strings (|S128), a double whose chunks
    are partly unwritten (netcdf-c's %g fill), a scalar, a typed attribute and a sub-group."""
    import netCDF4

    with netCDF4.Dataset(url(path), "w") as nc:
        nc.setncattr("answer", "42")
        nc.createDimension("x", 4)
        nc.createDimension("n", 3)
        nc.createVariable("b", "i1", ("x",))[:] = np.array([1, -1, 127, -128], "i1")
        v = nc.createVariable("i", "i4", ("x",), zlib=True, complevel=1, shuffle=True, chunksizes=(2,))
        v[:] = np.array([0, 1000, -2000, 3000], "i4")
        c = nc.createVariable("c", "S1", ("x", "n"), chunksizes=(2, 3))
        c[0:2, :] = np.array([[b"a", b"b", b""], [b"c", b"", b"d"]], "S1")  # rows 2-3: never written
        nc.createVariable("s", str, ("x",))[0:2] = np.array(["a", "ü"], dtype=object)
        nc.createVariable("d", "f8", ("x",), chunksizes=(1,))[0] = 1.5  # d[1:]: never written
        nc.createVariable("scalar", "f4", ())[...] = 2.5
        sh = nc.createVariable("sh", "i2", ("x",))
        sh[:] = np.array([1, 2, 3, 4], "i2")
        sh.setncattr("valid_max", np.int16(9))  # a short attribute: JSON reads it back as int
        g = nc.createGroup("g")
        g.createDimension("y", 2)
        g.createVariable("w", "f4", ("y", "x"))[:] = np.arange(8, dtype="f4").reshape(2, 4)
    return path


def our_model_written() -> Dataset:
    """What :func:`our_store` writes (the source values its tests expect where netcdf-c 4.10.1 reads no
    store: the 4.9.0 upper-case layout)."""
    return our_dataset(shuffle=True)


def our_dataset(*, shuffle: bool) -> Dataset:
    root = Group({"x": Dimension(4), "n": Dimension(2)}, {"title": Attribute("char", "t")})
    root.variables["i"] = Variable("int", ["/x"], (4,), {"_FillValue": Attribute("int", np.array([-1], "i4"))},
                                   np.array([1, 2, -3, 4], "i4"), chunks=[2], filters=[{"id": "zlib", "level": 1}])
    root.variables["d"] = Variable("double", ["/x"], (4,), {}, np.array([0.5, 1.5, 2.5, 3.5]), chunks=[4],
                                   endianness="big", filters=[{"id": "shuffle", "elementsize": 8}] * shuffle
                                   + [{"id": "zlib", "level": 1}])
    root.variables["c"] = Variable("char", ["/x", "/n"], (4, 2), {},
                                   np.array([[b"a", b"b"], [b"c", b"d"], [b"e", b"f"], [b"g", b"h"]], "S1"))
    sub = Group({"y": Dimension(3)})
    sub.variables["w"] = Variable("float", ["/g/y"], (3,), {}, np.array([1, 2, 3], "f4"))
    root.groups["g"] = sub
    return Dataset(root)


def our_store(path: Path, flavor: str, *, consolidate: bool | None = None, shuffle: bool = True) -> Path:
    """Our writer's store in a v2 flavor: zlib ints, a big-endian double with shuffle, char, a sub-group."""
    from nczarr_conformance.nczarr.writer import write_dataset
    from nczarr_conformance.stores import DirectoryStore

    with DirectoryStore(path, "w") as store:
        write_dataset(our_dataset(shuffle=shuffle), store, flavor=flavor, consolidate=consolidate)
    return path


def xarray_zarr2_store(path: Path, *, consolidated: bool) -> Path:
    """xarray's to_zarr(zarr_format=2) through zarr-python 3.1.6: blosc, _ARRAY_DIMENSIONS, a NaN fill."""
    import xarray as xr

    ds = xr.Dataset({"v": (("x", "y"), np.arange(12, dtype="f4").reshape(4, 3)),
                     "t": (("x",), np.array([1, 2, 3, 4], "i4"))}, attrs={"title": "xarray"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(str(path), zarr_format=2, mode="w", consolidated=consolidated,
                   encoding={"v": {"chunks": (2, 3)}, "t": {"_FillValue": -9}})
    return path


def zip_of(store: Path, dest: Path) -> Path:
    """The store as a zip with its objects at the top (where zarr-python's ZipStore looks for them)."""
    with zipfile.ZipFile(dest, "w") as zf:
        for p in sorted(store.rglob("*")):
            if p.is_file():
                zf.write(p, p.relative_to(store).as_posix())
    return dest


# ---- migrating ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def c_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The netcdf-c store and netCDF4-python's reading of it (made once: netcdf-c takes a while)."""
    path = netcdf_c_store(tmp_path_factory.mktemp("c") / "s.file")
    return path, netcdf_c_values(path)


@pytest.fixture(scope="module")
def c_migrated(c_store: tuple[Path, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Every object of the netcdf-c store once migrated in place, by a real process (exit 0)."""
    template, _ = c_store
    done = tmp_path_factory.mktemp("migrated") / "done.file"
    shutil.copytree(template, done)
    result = cli(str(done), "--to-v3", "--no-backup")
    assert result.returncode == 0, result.stderr
    return files(done)


@pytest.mark.parametrize("kind", ["dir", "zip"])
def test_a_netcdf_c_store_migrates_in_place_with_every_chunk_kept(c_store, tmp_path, kind, nczarr_fix):
    template, expected = c_store
    store = tmp_path / "s.file"
    shutil.copytree(template, store)
    if kind == "zip":
        store = zip_of(store, tmp_path / "s.zip")
    kept = chunks(store)
    model = our_model(store)
    result = nczarr_fix(str(store), "--to-v3", "--no-backup")
    assert result.returncode == 0, result.stderr
    assert chunks(store) == kept  # same keys, same bytes, and (a directory) the same files: never rewritten
    left = [k for k in files(store) if k.rsplit("/", 1)[-1] in V2_NAMES]
    assert not left, f"v2 metadata left: {left}"
    assert_same(expected, zarr_python_values(store), "zarr-python 3")
    if kind == "dir":
        assert_same(expected, xarray_values(store), "xarray")
    _our_reading_equal_less_what_v3_cannot_keep(model, our_model(store), result.stdout)


def _our_reading_equal_less_what_v3_cannot_keep(v2: Dataset, v3: Dataset, stdout: str) -> None:
    """Our reader reads the v3 store as the v2 one, less the losses the run named in its note lines: a
    short attribute read back as int, /g/w's use of the root's x (now g's own), the codecs' v3 names."""
    from nczarr_conformance.model import diff

    assert "/sh:valid_max (short)" in stdout and "/g/w uses /x" in stdout, stdout
    assert "numcodecs.shuffle, numcodecs.zlib" in stdout, stdout
    v3.root.variables["sh"].attributes["valid_max"] = v2.root.variables["sh"].attributes["valid_max"]
    differences = diff(v2, v3, ignore={"filters": "v3 names the same codecs numcodecs.shuffle/numcodecs.zlib",
                                       "order": "v3 has no order: C is the codecs' default, F a transpose",
                                       "dimension_separator": "v3 says it in chunk_key_encoding (v2, kept)"})
    assert differences == ['/root/groups/g/dimensions/x: only in second',
                           '/root/groups/g/variables/w/dimensions[1]: "/x" != "/g/x"'], differences


@pytest.mark.parametrize("flavor", ["nczarr-4.10", "nczarr-2", "nczarr-2-upper", "zarr"])
def test_each_v2_flavor_of_our_writer_migrates_to_what_netcdf_c_read(tmp_path, flavor, nczarr_fix):
    store = our_store(tmp_path / "o.file", flavor)
    if flavor == "nczarr-2-upper":  # netcdf-c 4.10.1 reads no upper-case store ("NCZarr error"): the source
        expected = {f"{g.strip('/')}/{n}".lstrip("/"): v.data for g, grp in our_model_written().root.walk()
                    for n, v in grp.variables.items()}
    else:
        expected = netcdf_c_values(store, "zarr" if flavor == "zarr" else "nczarr")
    kept = chunks(store)
    out = tmp_path / "o3.file"
    result = nczarr_fix(str(store), "--to-v3", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert {k: h for k, (h, _) in chunks(out).items()} == {k: h for k, (h, _) in kept.items()}
    assert chunks(store) == kept and (store / ".zgroup").exists()  # --out: the input only read
    assert_same(expected, zarr_python_values(out), "zarr-python 3")
    assert_same(expected, xarray_values(out), "xarray")
    d = v3_docs(out)["d/zarr.json"]
    stored = json.loads((store / "d" / ".zarray").read_text())["dtype"][0]  # the writer's byte order in v2
    assert d["codecs"][0] == {"name": "bytes", "configuration": {"endian": "big" if stored == ">" else "little"}}
    assert d["chunk_key_encoding"] == {"name": "v2", "configuration": {"separator": "."}}
    assert d["dimension_names"] == ["x"] and "_ARRAY_DIMENSIONS" not in d["attributes"]


@pytest.mark.parametrize("consolidated", [False, True])
def test_a_zarr_python_2_format_store_migrates(tmp_path, consolidated, nczarr_fix):
    store = xarray_zarr2_store(tmp_path / "x.zarr", consolidated=consolidated)
    expected = netcdf_c_values(store, "zarr")
    kept = chunks(store)
    result = nczarr_fix(str(store), "--to-v3", "--no-backup")
    assert result.returncode == 0, result.stderr
    assert chunks(store) == kept
    assert_same(expected, zarr_python_values(store), "zarr-python 3")
    assert_same(expected, xarray_values(store), "xarray")
    root = v3_docs(store)["zarr.json"]
    assert sorted(root["consolidated_metadata"]["metadata"]) == ["t", "v"]


# ---- against zarr-python's own migration ---------------------------------------------------------------------
#: zarr-python's ``zarr migrate v3 SRC DEST`` (its CLI's function; the CLI itself needs typer), in a process of
#: its own as the CLI would run: what it refuses must not depend on what earlier tests left in this interpreter
_MIGRATE = """
import sys, warnings
from zarr.metadata.migrate_v3 import migrate_v2_to_v3
from zarr.storage import LocalStore
try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        migrate_v2_to_v3(input_store=LocalStore(sys.argv[1], read_only=False), output_store=LocalStore(sys.argv[2]))
except Exception as exc:  # zarr-python's own types (TypeError, ValueError, NotImplementedError)
    print(f"{type(exc).__name__}: {exc}")
"""


def zarr_migrate(src: Path, dest: Path) -> str | None:
    """zarr-python's migration of ``src`` into ``dest``: None, or why it refused."""
    done = subprocess.run([sys.executable, "-c", _MIGRATE, str(src), str(dest)], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip() or None


def explained(ours: dict[str, Any], theirs: dict[str, Any], v2: Path, key: str) -> dict[str, Any]:
    """``ours`` with every difference from zarr-python's document undone, each for its stated reason."""
    doc = dict(ours)
    node = key.rsplit("/", 1)[0] if "/" in key else ""
    zattrs = v2 / node / ".zattrs"
    # 1. attributes: zarr-python copies .zattrs verbatim, NCZarr bookkeeping (_nczarr_*, _NCProperties) and
    #    _ARRAY_DIMENSIONS included; we keep the user attributes (typed ones as their JSON text, as the v3
    #    writer writes them) and move the dimension names into dimension_names
    doc["attributes"] = json.loads(zattrs.read_text()) if zattrs.exists() else {}
    # 2. dimension_names: zarr-python writes none (it leaves them in _ARRAY_DIMENSIONS)
    doc.pop("dimension_names", None)
    # 3. consolidated metadata: we write it into the root zarr.json (as to_zarr does); zarr-python writes none
    doc.pop("consolidated_metadata", None)
    return doc


@pytest.mark.parametrize("case", ["netcdf-c", "ours-nczarr", "ours-zarr", "xarray-zarr2"])
def test_metadata_equals_zarr_migrate_v3_but_for_the_listed_differences(tmp_path, case, nczarr_fix):
    """On a store zarr-python's migration accepts, every zarr.json equals its own but for the three
    differences :func:`explained` names and undoes: data type, chunk grid, chunk key encoding, fill and
    codecs are the same to the byte."""
    import netCDF4

    src = tmp_path / "v2"
    if case == "netcdf-c":  # what zarr-python accepts of netcdf-c's kinds: no <i1, >S1, shuffle, scalar
        with netCDF4.Dataset(url(src), "w") as nc:
            nc.setncattr("answer", "42")
            nc.createDimension("x", 4)
            nc.createVariable("d", "f8", ("x",), chunksizes=(1,))[0] = 1.5
            nc.createVariable("z", "i4", ("x",), zlib=True, shuffle=False, complevel=3, chunksizes=(2,))[:] = \
                np.arange(4)
            g = nc.createGroup("g")
            g.createDimension("y", 2)
            g.createVariable("w", "f4", ("y", "x"))[:] = np.arange(8, dtype="f4").reshape(2, 4)
    elif case.startswith("ours"):  # no .zmetadata: zarr-python refuses consolidated stores
        our_store(src, "nczarr-4.10" if case == "ours-nczarr" else "zarr", consolidate=False, shuffle=False)
        for node in ("c",):  # >S1: zarr-python refuses it (see the refusal test); not compared
            shutil.rmtree(src / node)
        _drop_from_group(src, "c")
    else:
        xarray_zarr2_store(src, consolidated=False)
    theirs_dir = tmp_path / "theirs"
    assert zarr_migrate(src, theirs_dir) is None
    ours_dir = tmp_path / "ours"
    result = nczarr_fix(str(src), "--to-v3", "--out", str(ours_dir))
    assert result.returncode == 0, result.stderr
    ours, theirs = v3_docs(ours_dir), v3_docs(theirs_dir)
    assert sorted(ours) == sorted(theirs)
    for key in sorted(theirs):
        assert explained(ours[key], theirs[key], src, key) == theirs[key], key


def _drop_from_group(store: Path, name: str) -> None:
    """Our NCZarr writer lists a group's arrays in _nczarr_group: a removed one leaves the list too."""
    zattrs = store / ".zattrs"
    doc = json.loads(zattrs.read_text())
    for piece in ("_nczarr_group", "_NCZARR_GROUP"):
        if piece in doc:
            doc[piece]["arrays"] = [a for a in doc[piece]["arrays"] if a != name]
            doc[piece].setdefault("dimensions", {}).pop("n", None)
    zattrs.write_text(json.dumps(doc))


@pytest.mark.parametrize("what,refusal", [
    # the byte store holds a byte and a ubyte array: zarr-python names the first it lists, in the file
    # system's order, so either one-byte dtype it refuses may be the one named
    ("byte", ("'<i1'", "'<u1'")), ("char", ("'>S1'",)), ("shuffle", ("is not an ArrayArrayCodec",)),
    ("consolidated", ("consolidated metadata isn't supported",)), ("null-fill", ("Cannot convert object None",)),
])
def test_what_zarr_migrate_refuses_and_to_v3_migrates(tmp_path, what, refusal, nczarr_fix):
    """The stores zarr-python's own migration refuses (the message it raises), each migrated by --to-v3 to
    values zarr-python 3 then reads as netCDF4-python read the original."""
    src = tmp_path / "v2"
    if what in ("byte", "char", "shuffle"):
        c410(src, **{what: True})
    elif what == "consolidated":
        xarray_zarr2_store(src, consolidated=True)
    else:  # xarray writes fill_value null for an integer without _FillValue
        import xarray as xr

        xr.Dataset({"t": (("x",), np.arange(3, dtype="i8"))}).to_zarr(str(src), zarr_format=2, consolidated=False)
    mode = "nczarr" if what in ("byte", "char", "shuffle") else "zarr"
    expected = netcdf_c_values(src, mode)
    why = zarr_migrate(src, tmp_path / "theirs")
    assert why is not None and any(words in why for words in refusal), why
    out = tmp_path / "ours"
    result = nczarr_fix(str(src), "--to-v3", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert_same(expected, zarr_python_values(out), "zarr-python 3")


# ---- refusals, dry run, failures -----------------------------------------------------------------------------
def _edit_zarray(store: Path, node: str, **changes: Any) -> None:
    path = store / node / ".zarray"
    doc = json.loads(path.read_text())
    doc.update(changes)
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("edit,words", [
    ({"filters": [{"id": "delta", "dtype": "<i4"}]}, ["/i", "'delta'", "array values"]),
    ({"compressor": {"id": "szip-unknown"}}, ["/i", "'szip-unknown'", "no Zarr v3 form zarr-python reads"]),
])
def test_a_codec_without_a_v3_form_is_refused_in_one_line_store_untouched(tmp_path, edit, words, nczarr_fix):
    store = our_store(tmp_path / "o.file", "nczarr-4.10", consolidate=False)
    _edit_zarray(store, "i", **edit)
    before = files(store)
    result = nczarr_fix(str(store), "--to-v3")
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert line.startswith(f"nczarr-fix: {store}: ") and line.endswith("nothing was changed"), line
    assert all(w in line for w in words), line
    assert files(store) == before and sorted(os.listdir(tmp_path)) == ["o.file"]


def test_a_stale_zmetadata_is_refused(tmp_path):
    store = our_store(tmp_path / "o.file", "zarr", consolidate=True)
    _edit_zarray(store, "i", fill_value=7)
    before = files(store)
    result = cli(str(store), "--to-v3")
    assert result.returncode == 2 and "stale" in one_line(result.stderr)
    assert files(store) == before


@pytest.mark.parametrize("zattrs", ["i/.zattrs", ".zattrs"])
def test_a_zmetadata_stale_only_in_a_zattrs_is_refused(tmp_path, zattrs, nczarr_fix):
    """An attribute added to a ``.zattrs`` after consolidating (an array's, the root's): the migration would
    otherwise carry the consolidated copy into zarr.json and lose the attribute the object holds."""
    store = our_store(tmp_path / "o.file", "zarr", consolidate=True)
    path = store / zattrs
    doc = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**doc, "added_later": "yes"}))
    assert json.loads((store / ".zmetadata").read_text())["metadata"].get(zattrs) != json.loads(path.read_text())
    before = files(store)
    result = nczarr_fix(str(store), "--to-v3")
    assert result.returncode == 2
    assert f"/.zmetadata is stale ({zattrs} differs)" in one_line(result.stderr), result.stderr
    assert files(store) == before and sorted(os.listdir(tmp_path)) == ["o.file"]


def test_the_draft_layout_is_refused_and_nz_refuses_the_strings_it_would_keep_as_bytes(tmp_path, nczarr_fix, capfd):
    """--flavor nczarr-v3-draft is not a migration target (its char and string types are not the v2
    chunks' bytes): one line, exit 2, nothing written. --flavor nz migrates (tests/zarr3/test_nz.py) but not
    string arrays, whose stored bytes would be null_terminated_bytes, which NZ's own validator refuses
    (tests/zarr3/test_nz.py::test_char_and_mixed_float_attributes_are_refused_by_name): named, exit 2."""
    import netCDF4

    store = our_store(tmp_path / "o.file", "zarr")
    before = files(store)
    result = nczarr_fix(str(store), "--to-v3", "--flavor", "nczarr-v3-draft")
    assert result.returncode == 2 and "--flavor nczarr-v3-draft" in one_line(result.stderr)
    assert files(store) == before
    src = tmp_path / "s.nc"
    with netCDF4.Dataset(str(src), "w") as nc:
        nc.createDimension("x", 2)
        nc.createVariable("names", str, ("x",))[:] = np.array(["ab", "c"], dtype=object)
    v2 = tmp_path / "s.zarr"
    done = run_main(nc2nczarr_main, ["-q", str(src), str(v2)], capfd)
    assert done.returncode == 0, done.stderr
    before = files(v2)
    result = nczarr_fix(str(v2), "--to-v3", "--flavor", "nz", "--no-backup")
    assert result.returncode == 2, result.stderr
    said = one_line(result.stderr)
    assert "NZ-1.0 cannot hold the strings of /names" in said and "nc2nczarr --zarr-format 3 --flavor nz" in said
    assert files(v2) == before


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path):
    store = our_store(tmp_path / "o.file", "nczarr-4.10")
    before = files(store)
    result = cli(str(store), "--to-v3", "--dry-run")
    assert result.returncode == 1, result.stderr
    assert "+++ b/i/zarr.json" in result.stdout and "--- a/i/.zarray" in result.stdout
    assert files(store) == before and sorted(os.listdir(tmp_path)) == ["o.file"]


def test_a_migrated_store_is_left_as_it_is(tmp_path, nczarr_fix):
    store = our_store(tmp_path / "o.file", "zarr")
    assert nczarr_fix(str(store), "--to-v3", "--no-backup").returncode == 0
    after = files(store)
    again = nczarr_fix(str(store), "--to-v3")
    assert again.returncode == 0 and "already Zarr v3" in again.stdout
    assert files(store) == after


def test_the_backup_holds_the_v2_metadata(tmp_path, nczarr_fix):
    store = our_store(tmp_path / "o.file", "nczarr-4.10")
    v2 = {k: v for k, v in files(store).items() if k.rsplit("/", 1)[-1] in V2_NAMES}
    assert nczarr_fix(str(store), "--to-v3").returncode == 0
    (backup,) = [p for p in tmp_path.iterdir() if ".nczarr-fix-backup-" in p.name]
    manifest = json.loads((backup / "nczarr-fix-backup.json").read_text())
    assert {k: v for k, v in files(backup).items() if k != "nczarr-fix-backup.json"} == v2
    assert sorted(manifest["created"]) == sorted("/" + k for k in v3_docs(store))


def test_a_write_failing_part_way_changes_nothing(tmp_path):
    """A file-size limit the root zarr.json (holding the consolidated metadata) exceeds and every other
    object fits: the run fails at that write, and the store is the v2 one, byte for byte."""
    import resource

    store = our_store(tmp_path / "o.file", "nczarr-4.10")
    before = files(store)
    limit = 2048

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    result = cli(str(store), "--to-v3", "--no-backup", preexec=small_files)
    assert result.returncode == 2, result.stdout
    line = one_line(result.stderr)
    assert "zarr.json" in line and "nothing was changed" in line, line
    assert files(store) == before and sorted(os.listdir(tmp_path)) == ["o.file"]


@pytest.mark.parametrize("delay", [0.0, 0.2, 0.5, 0.8])
def test_a_kill_leaves_the_v2_store_or_the_v3_one_and_a_rerun_finishes(c_store, c_migrated, tmp_path, delay,
                                                                       nczarr_fix):
    """SIGKILL at a few moments of an in-place run (each try must hold): the store is the v2 one or the
    migrated one, never a mix; the next run removes what the killed one left beside it and finishes."""
    template, _ = c_store
    migrated = c_migrated
    store = tmp_path / "s.file"
    shutil.copytree(template, store)
    before = files(store)
    proc = subprocess.Popen([sys.executable, "-m", "nczarr_conformance.cli.fix", str(store), "--to-v3",
                             "--no-backup"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert files(store) in (before, migrated), "a mix of v2 and v3"
    assert not [p for p in store.rglob("*") if "partial" in p.name]
    again = nczarr_fix(str(store), "--to-v3", "--no-backup")
    assert again.returncode == 0, again.stderr
    assert files(store) == migrated
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_s3_in_place_and_out(tmp_path, s3_bucket, moto_server, nczarr_fix):
    import boto3

    client = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")
    local = our_store(tmp_path / "o.file", "nczarr-4.10")
    expected = netcdf_c_values(local)
    for key, data in files(local).items():
        client.put_object(Bucket=s3_bucket, Key=f"ds/{key}", Body=data)
    src = f"s3://{s3_bucket}/ds"
    out = tmp_path / "o3.file"
    assert nczarr_fix(src, "--to-v3", "--out", str(out)).returncode == 0
    assert_same(expected, zarr_python_values(out), "zarr-python 3")
    result = nczarr_fix(src, "--to-v3")
    assert result.returncode == 0, result.stderr
    listed = {o["Key"] for o in client.list_objects_v2(Bucket=s3_bucket).get("Contents", [])}
    migrated = {k: client.get_object(Bucket=s3_bucket, Key=k)["Body"].read() for k in listed if k.startswith("ds/")}
    assert {k[len("ds/"):]: v for k, v in migrated.items()} == files(out)
    backup = {k.split("/", 1)[1] for k in listed if k.startswith("ds.nczarr-fix-backup-")}
    assert backup == {k for k in files(local) if k.rsplit("/", 1)[-1] in V2_NAMES} | {"nczarr-fix-backup.json"}
