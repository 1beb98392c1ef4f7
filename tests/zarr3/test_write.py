"""Writing Zarr v3 (issue #25, write slice): ``nc2nczarr --zarr-format 3`` and ``write(..., zarr_format=3)``.

Expected values come from peers, never from the writer under test: the source's values and layout from
netCDF4-python and h5py, the expected ``zarr.json`` documents from xarray's ``to_zarr(zarr_format=3)`` and
zarr-python's ``create_array`` given that same layout, the values read back by zarr-python 3.1.6 (in
process), zarr-python 3.4.2 (its own venv, through adapters/zarr-python/read.py), xarray (engine zarr)
and our reader.
"""
from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
import warnings
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nczarr_conformance.cli import convert, dump
from tests.conftest import REPO, in_ci, missing_peer, require_module
from tests.in_process import run_main
from tests.test_convert_valid import run_cli

netCDF4 = require_module("netCDF4")
zarr = require_module("zarr")
xr = require_module("xarray")
h5py = require_module("h5py")
if int(zarr.__version__.split(".")[0]) < 3:
    missing_peer("zarr-python 3 is needed to compare Zarr v3")

from zarr.codecs import BloscCodec, BytesCodec, GzipCodec  # noqa: E402

ZARR342 = Path.home() / ".cache" / "nczarr-zarr342" / "bin" / "python"
ADAPTER = REPO / "adapters" / "zarr-python" / "read.py"
ROWS = np.arange(20, dtype="f4").reshape(4, 5)


def make_source(path: Path) -> Path:
    """One variable per case the v3 layout treats apart (netCDF4-python writes it)."""
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("t", None)
        nc.createDimension("x", 5)
        nc.createDimension("n", 3)
        nc.title = "v3 write"
        nc.factor16 = np.uint16(7)
        f = nc.createVariable("f", "f4", ("t", "x"), fill_value=-9.5, chunksizes=(2, 5))
        f[:] = ROWS
        f.units = "m"
        z = nc.createVariable("z", "f8", ("t", "x"), zlib=True, shuffle=False, complevel=3, chunksizes=(1, 5))
        z[:] = ROWS / 3
        zs = nc.createVariable("zs", "i2", ("t", "x"), zlib=True, shuffle=True, complevel=2, chunksizes=(2, 5))
        zs[:] = ROWS.astype("i2") * 3
        b = nc.createVariable("b", "i4", ("x",), endian="big", fill_value=-7)
        b[:3] = [1, 2, 3]
        nc.createVariable("u", "u1", ("n",))[:] = [1, 2, 255]
        c = nc.createVariable("c", "S1", ("n",), fill_value=b"-")
        c[:] = np.array([b"a", b"b", b"c"])
        nc.createVariable("st", str, ("n",))[:] = np.array(["a", "bé", ""], dtype=object)
        nc.createVariable("sc", "f8", ()).assignValue(2.5)
        nan = nc.createVariable("nan", "f8", ("x",), fill_value=np.nan)
        nan[:2] = [1.5, -np.inf]
        g = nc.createGroup("g")
        g.createDimension("y", 2)
        g.createVariable("w", "i8", ("y",))[:] = [10, 20]
        g.where = "g"
    return path


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_source(tmp_path_factory.mktemp("v3src") / "src.nc")


@pytest.fixture(scope="module")
def expected(source: Path) -> dict[str, Any]:
    """netCDF4-python's reading of the source, once, before h5py or xarray open the file (two HDF5 libraries
    in one process opening one file can crash: sources/hdf5_chunks.py)."""
    return source_values(source)


@pytest.fixture(scope="module")
def converted(source: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = source.parent / "out.zarr"
    shutil.rmtree(out, ignore_errors=True)
    done = run_cli("--zarr-format", "3", str(source), str(out))
    assert done.returncode == 0, done.stderr
    return out, done


def doc(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((path / "zarr.json").read_text())
    return loaded


# ---- the source as netCDF4-python and h5py see it ---------------------------------------------------

def source_values(src: Path) -> dict[str, Any]:
    """{"/f": values, …}: what netCDF4-python reads (unmasked, as stored)."""
    out: dict[str, Any] = {}
    with netCDF4.Dataset(src) as nc:
        nc.set_auto_mask(False)

        def walk(group: Any, prefix: str) -> None:
            for name, var in group.variables.items():
                out[f"{prefix}/{name}"] = np.asarray(var[...])
            for name, sub in group.groups.items():
                walk(sub, f"{prefix}/{name}")

        walk(nc, "")
    return out


def expected_codecs(var: Any) -> list[Any]:
    """The v3 codecs the documented rule gives for netCDF4-python's view of a variable's filters
    (docs: deflate → gzip; shuffle + deflate → blosc zlib with byte shuffle)."""
    filters = var.filters()
    if filters.get("zlib") and filters.get("shuffle"):
        return [BloscCodec(cname="zlib", clevel=filters["complevel"], shuffle="shuffle", typesize=var.dtype.itemsize)]
    if filters.get("zlib"):
        return [GzipCodec(level=filters["complevel"])]
    return []


# ---- storage: the documents xarray and zarr-python write for the same data ---------------------------

def xarray_layout(src: Path, tmp: Path) -> Path:
    """What xarray writes for the source, told the source's chunks, codecs, byte order and fill (netCDF4-python's
    view of them), strings as Python objects (read from a netCDF file xarray keeps them as numpy ``<U``,
    which it writes as fixed_length_utf32, a type zarr-python calls unstable)."""
    tree = xr.open_datatree(src, decode_cf=False).load()
    tree.close()  # nothing of the file stays open (see the expected fixture)
    encoding: dict[str, dict[str, Any]] = {}
    with netCDF4.Dataset(src) as nc:
        for path, node in tree.subtree_with_keys:
            group = nc if path == "." else nc[path]
            enc: dict[str, Any] = {}
            for name in node.ds.data_vars:
                var = group.variables[name]
                e: dict[str, Any] = {"compressors": expected_codecs(var)}
                if var.chunking() != "contiguous":
                    e["chunks"] = tuple(var.chunking())
                if var.dtype != str and var.dtype.itemsize > 1:
                    e["serializer"] = BytesCodec(endian="big" if var.endian() == "big" else "little")
                fill = var.getncattr("_FillValue") if "_FillValue" in var.ncattrs() else (
                    None if var.dtype == str else netCDF4.default_fillvals[var.dtype.str[1:]])
                if var.dtype != str and fill is not None:
                    e["fill_value"] = fill
                if "_FillValue" not in var.ncattrs():
                    e["_FillValue"] = None  # else xarray adds _FillValue NaN to floats, which the source lacks
                if var.dtype == str:
                    node[name] = node[name].astype(object)
                if var.endian() == "big":
                    node[name] = node[name].astype(var.dtype.newbyteorder(">"))
                enc[name] = e
            encoding["/" if path == "." else f"/{path}"] = enc
    out = tmp / "xarray.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree.to_zarr(out, zarr_format=3, consolidated=True, encoding=encoding)
    return out


def test_every_zarr_json_is_what_xarray_writes(source: Path, converted: Any, tmp_path: Path) -> None:
    """Every array's and group's ``zarr.json``, and the root's consolidated metadata, equal xarray's for the
    same data, key order included (xarray does not drop the big-endian order it is given here)."""
    out, _ = converted
    theirs = xarray_layout(source, tmp_path)
    ours_docs = {p.parent.relative_to(out).as_posix(): json.loads(p.read_text()) for p in out.rglob("zarr.json")}
    their_docs = {p.parent.relative_to(theirs).as_posix(): json.loads(p.read_text()) for p in theirs.rglob("zarr.json")}
    assert sorted(ours_docs) == sorted(their_docs)
    for path, expected in their_docs.items():
        assert ours_docs[path] == expected, path
        assert list(ours_docs[path]) == list(expected), path  # zarr-python's key order
    assert (out / "zarr.json").read_text() == (theirs / "zarr.json").read_text()  # byte for byte, indent included


def test_storage_is_what_zarr_python_writes_for_the_netcdf_layout(source: Path, converted: Any, tmp_path: Path) -> None:
    """Chunk shape, data type, byte order, codecs and their parameters, fill value and dimension names of each
    array: zarr-python's own metadata for an array made from netCDF4-python's description of the variable."""
    out, _ = converted
    ref = zarr.open_group(str(tmp_path / "ref"), mode="w", zarr_format=3)
    with netCDF4.Dataset(source) as nc:
        for name, var in nc.variables.items():
            if var.dtype == str or var.dtype.kind == "S":
                continue  # strings and char: covered by the xarray comparison
            fill = var.getncattr("_FillValue") if "_FillValue" in var.ncattrs() else \
                netCDF4.default_fillvals[var.dtype.str[1:]]
            chunks = tuple(var.chunking()) if var.chunking() != "contiguous" else var.shape
            kwargs: dict[str, Any] = {}
            if var.dtype.itemsize > 1:
                kwargs["serializer"] = BytesCodec(endian="big" if var.endian() == "big" else "little")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref.create_array(name, shape=var.shape, chunks=chunks, dtype=var.dtype, fill_value=fill,
                                 compressors=expected_codecs(var), dimension_names=var.dimensions or None, **kwargs)
            expected = doc(tmp_path / "ref" / name)
            ours = doc(out / name)
            for key in ("shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs"):
                assert ours[key] == expected[key], (name, key)
            assert ours.get("dimension_names") == expected.get("dimension_names"), name


# ---- values: every reader against the source ----------------------------------------------------------

def _same(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "SUO" or b.dtype.kind in "SUO":
        norm = np.vectorize(lambda v: v.decode("utf-8") if isinstance(v, bytes) else str(v), otypes=[object])
        return bool(a.shape == b.shape and (norm(a) == norm(b)).all())
    return bool(np.array_equal(a, b, equal_nan=True))


def test_values_read_back_by_zarr_python_xarray_and_our_reader(expected: dict[str, Any], converted: Any) -> None:
    out, _ = converted
    from nczarr_conformance.stores import open_store
    from nczarr_conformance.zarr3.reader import read_any

    with open_store(str(out)) as store:
        ours = read_any(store)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        group = zarr.open_group(str(out), mode="r")
        # xarray 2026.9 cannot read a char (S1) array's _FillValue back, in its own v3 output too (below): read
        # a copy without that array
        ds = xr.open_dataset(_without(out, "c"), engine="zarr", mask_and_scale=False)
        for key, values in expected.items():
            assert _same(group[key.lstrip("/")][...], values), key
            node, _, name = key.rpartition("/")
            assert _same(_model_var(ours, key).data, values), key
            if not node and name != "c":
                assert _same(ds[name].values, values), key
        assert ds["f"].dims == ("t", "x") and ds.attrs["title"] == "v3 write"
        own = xr.Dataset({"c": ("n", np.array([b"a"], dtype="S1"), {"_FillValue": b"-"})})
        own.to_zarr(out.parent / "xarray-char.zarr", zarr_format=3, mode="w")
        with pytest.raises(ValueError, match="Unsupported dtype"):
            xr.open_dataset(out.parent / "xarray-char.zarr", engine="zarr")


def _without(store: Path, name: str) -> Path:
    """A copy of the directory store ``store`` without its root array ``name`` (consolidated metadata too)."""
    copy = store.parent / f"{store.name}-without-{name}"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(store, copy, ignore=lambda d, names: [name] if Path(d) == store else [])
    root = json.loads((copy / "zarr.json").read_text())
    root["consolidated_metadata"]["metadata"].pop(name)
    (copy / "zarr.json").write_text(json.dumps(root))
    return copy


def _model_var(ds: Any, key: str) -> Any:
    node, _, name = key.rpartition("/")
    group = ds.root
    for part in [p for p in node.split("/") if p]:
        group = group.groups[part]
    return group.variables[name]


def _adapter(python: Path, out: Path) -> dict[str, Any]:
    done = subprocess.run([str(python), str(ADAPTER), str(out)], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    model: dict[str, Any] = json.loads(done.stdout)
    return model


def _adapter_values(model: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def walk(group: dict[str, Any], prefix: str) -> None:
        for name, var in group["variables"].items():
            out[f"{prefix}/{name}"] = var["data"]
        for name, sub in group["groups"].items():
            walk(sub, f"{prefix}/{name}")

    walk(model["root"], "")
    return out


def _json_values(values: np.ndarray) -> Any:
    """The source's values spelled as the adapter's model JSON spells them."""
    if values.dtype.kind == "S":
        return [v.decode("latin-1") or "\0" for v in values.ravel().tolist()]
    if values.dtype.kind in "UO":
        return values.tolist()
    if values.dtype.kind == "f":
        return json.loads(json.dumps(np.where(np.isnan(values), None, values).tolist()).replace("null", '"NaN"')
                          .replace("-Infinity", '"-Infinity"')) if np.isnan(values).any() else values.tolist()
    return values.tolist()


@pytest.mark.parametrize("which", ["zarr-python 3.1.6", "zarr-python 3.4.2"])
def test_values_read_by_zarr_python_adapters(expected: dict[str, Any], converted: Any, which: str) -> None:
    """zarr-python itself, standalone (adapters/zarr-python/read.py): 3.1.6 here, 3.4.2 in its own venv
    (a missing venv is a skip locally and a failure under CI=true, as for the zarr-python-3.4 peer)."""
    out, _ = converted
    python = Path(sys.executable) if which.endswith("3.1.6") else ZARR342
    if not python.exists():
        missing_peer(f"{which}: no venv at {python} (scripts/test makes it)")
    got = _adapter_values(_adapter(python, out))
    for key, values in expected.items():
        want = values
        if key == "/nan":
            assert got[key][:2] == [1.5, "-Infinity"] and all(v == "NaN" for v in got[key][2:]), got[key]
            continue
        if want.dtype.kind == "S":
            assert [v.encode("latin-1") for v in got[key]] == [v or b"\0" for v in want.tolist()], key
        elif want.dtype.kind in "UO":
            assert got[key] == want.tolist(), key
        else:
            assert np.array_equal(np.asarray(got[key], dtype=want.dtype), want), key


# ---- what v3 cannot keep, and what is refused ---------------------------------------------------------

def test_one_warning_line_names_what_v3_does_not_keep(source: Path, converted: Any) -> None:
    """The source's unlimited dimension and its attributes of types JSON does not carry (netCDF4-python: a
    ushort global attribute) are named in one line; nothing else is said."""
    _, done = converted
    lines = [line for line in done.stderr.splitlines() if "warning" in line]
    assert len(lines) == 1, done.stderr
    with netCDF4.Dataset(source) as nc:
        unlimited = [f"/{n}" for n, d in nc.dimensions.items() if d.isunlimited()]
        ushort = [f"/:{a}" for a in nc.ncattrs() if np.asarray(nc.getncattr(a)).dtype == np.uint16]
    assert unlimited == ["/t"] and ushort == ["/:factor16"]
    assert "unlimited dimensions (written at their current length): /t;" in lines[0]
    assert "/:factor16 (ushort)" in lines[0]


@pytest.mark.parametrize("flavor", ["nczarr"])  # nz, nczarr-v3-draft are written: tests/zarr3/test_nz.py, test_draft.py
def test_flavors_not_written_for_v3_are_refused_in_one_line(source: Path, tmp_path: Path, flavor: str) -> None:
    out = tmp_path / "o.zarr"
    done = run_cli("--zarr-format", "3", "--flavor", flavor, str(source), str(out))
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert f"--flavor {flavor}" in done.stderr and "Traceback" not in done.stderr
    why = "is a Zarr v2 layout" if flavor == "nczarr" else "is not written yet for Zarr v3"
    assert why in done.stderr, done.stderr
    assert not out.exists()


@pytest.mark.parametrize("args", [["--shard", "2"], ["--zarr-format", "3", "--shard", "0"],
                                  ["--zarr-format", "3", "--char-as", "S1"]])
def test_v3_options_misused_are_one_line(source: Path, tmp_path: Path, args: list[str]) -> None:
    """nc2nczarr's main(argv) in this process (tests/in_process.py): the words and the code are the point; the
    command started for real says its one line in test_flavors_not_written_for_v3_are_refused_in_one_line."""
    out = tmp_path / "o.zarr"
    done = run_main(convert.main, [*args, str(source), str(out)])
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not out.exists()


#: the one line nc2nczarr and convert() give a shard asked of Zarr v2 (docs/commands.md: "--shard without it ... refused
#: in one line, exit 2")
NO_V2_SHARDS = "--shard needs --zarr-format 3 (Zarr v2 has no shards)"


@pytest.mark.parametrize("run", [[], ["--zarr-format", "2"], ["--concat", "time"], ["--reference"]],
                         ids=["convert", "zarr-format-2", "concat", "reference"])
def test_a_shard_without_zarr_format_3_is_a_usage_error_of_every_run(source: Path, tmp_path: Path,
                                                                      run: list[str]) -> None:
    """``--shard`` of Zarr v2 is argparse's usage error (exit 2, its ``(see --help)``), said before any input is
    opened, whichever run it comes with: a --concat, which takes no shard, would otherwise drop it unsaid."""
    inputs = [str(tmp_path / "a.nc"), str(tmp_path / "b.nc")] if "--concat" in run else [str(source)]
    out = tmp_path / ("o.json" if "--reference" in run else "o.zarr")
    done = run_main(convert.main, [*run, "--shard", "2", *inputs, str(out)])
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"nc2nczarr: {NO_V2_SHARDS} (see --help)\n")
    assert not out.exists()


def test_convert_and_write_refuse_a_shard_without_zarr_format_3(source: Path, tmp_path: Path) -> None:
    """The Python API holds the rule too: ``convert(..., shard=N)`` and ``write(model, shard=N)`` without
    ``zarr_format=3`` raise the command's line as a UsageError, writing nothing."""
    import nczarr_conformance as ncz
    from nczarr_conformance.errors import UsageError
    from nczarr_conformance.sources import netcdf4 as nc4

    out = tmp_path / "o.zarr"
    for zarr_format in (None, 2):
        with pytest.raises(UsageError) as refused:
            ncz.convert(source, out, zarr_format=zarr_format, shard=2)
        assert str(refused.value) == NO_V2_SHARDS
        assert not out.exists()
        with pytest.raises(UsageError) as refused:
            ncz.write(nc4.read(str(source)), out, zarr_format=zarr_format, shard=2)
        assert str(refused.value) == NO_V2_SHARDS
        assert not out.exists()


# ---- sharding ------------------------------------------------------------------------------------------

def test_shard_layout_is_zarr_pythons_and_reads_back(tmp_path: Path) -> None:
    """``--shard 4``: one object per 4 chunks along the first dimension; the sharding codec, its inner codecs
    and index codecs equal what zarr-python writes for ``shards=``; the inner chunk bytes equal zarr-python's
    (same codecs, C order = Morton order along one axis); all-fill inner chunks left out as zarr-python does."""
    src = tmp_path / "s.nc"
    data = np.arange(30 * 6, dtype="<i4").reshape(30, 6)
    data[8:12] = -1  # one whole inner chunk of fill
    with netCDF4.Dataset(src, "w") as nc:
        nc.createDimension("t", 30)
        nc.createDimension("x", 6)
        v = nc.createVariable("v", "i4", ("t", "x"), chunksizes=(4, 6), fill_value=-1)
        v[:] = data
    out = tmp_path / "o.zarr"
    done = run_cli("--quiet", "--zarr-format", "3", "--shard", "4", str(src), str(out))
    assert done.returncode == 0, done.stderr
    ref = zarr.open_group(str(tmp_path / "ref"), mode="w", zarr_format=3)
    arr = ref.create_array("v", shape=data.shape, chunks=(4, 6), shards=(16, 6), dtype="<i4", fill_value=-1,
                           compressors=None, dimension_names=["t", "x"])
    arr[:] = data
    assert doc(out / "v")["codecs"] == doc(tmp_path / "ref" / "v")["codecs"]
    assert doc(out / "v")["chunk_grid"] == doc(tmp_path / "ref" / "v")["chunk_grid"]
    ours = sorted(p.relative_to(out / "v").as_posix() for p in (out / "v" / "c").rglob("*") if p.is_file())
    theirs = sorted(p.relative_to(tmp_path / "ref" / "v").as_posix()
                    for p in (tmp_path / "ref" / "v" / "c").rglob("*") if p.is_file())
    assert ours == theirs == ["c/0/0", "c/1/0"]
    for key in ours:
        assert (out / "v" / key).read_bytes() == (tmp_path / "ref" / "v" / key).read_bytes(), key
    assert np.array_equal(zarr.open_group(str(out), mode="r")["v"][...], data)


def test_a_shard_larger_than_the_first_dimension_is_capped_at_its_chunks(tmp_path: Path) -> None:
    """``--shard 8`` on 3 chunks along ``t`` (10 rows of 4): one shard of those 3 chunks (docs/writer.md), the
    shard shape in zarr.json and the 3-entry index (3 x 16 + 4 bytes) what zarr-python writes for ``shards=(12, 6)``,
    not a shard of 8 chunks whose index holds 5 empty entries past the array's end."""
    import numcodecs

    src = tmp_path / "s.nc"
    data = np.arange(10 * 6, dtype="<i4").reshape(10, 6)
    with netCDF4.Dataset(src, "w") as nc:
        nc.createDimension("t", 10)
        nc.createDimension("x", 6)
        nc.createVariable("v", "i4", ("t", "x"), chunksizes=(4, 6), fill_value=-1)[:] = data
    out = tmp_path / "o.zarr"
    done = run_cli("--quiet", "--zarr-format", "3", "--shard", "8", str(src), str(out))
    assert done.returncode == 0, done.stderr
    ref = zarr.open_group(str(tmp_path / "ref"), mode="w", zarr_format=3)
    ref.create_array("v", shape=data.shape, chunks=(4, 6), shards=(12, 6), dtype="<i4", fill_value=-1,
                     compressors=None, dimension_names=["t", "x"])[:] = data
    ours, theirs = doc(out / "v"), doc(tmp_path / "ref" / "v")
    assert ours["chunk_grid"] == theirs["chunk_grid"] == {"name": "regular", "configuration": {"chunk_shape": [12, 6]}}
    assert ours["codecs"] == theirs["codecs"]
    assert [p.name for p in (out / "v" / "c").rglob("*") if p.is_file()] == ["0"]
    shard = (out / "v" / "c" / "0" / "0").read_bytes()
    assert shard == (tmp_path / "ref" / "v" / "c" / "0" / "0").read_bytes()
    index = np.frombuffer(numcodecs.CRC32C(location="end").decode(shard[-(3 * 16 + 4):]), dtype="<u8").reshape(3, 2)
    assert index[:, 1].tolist() == [4 * 6 * 4] * 3 and len(shard) == 3 * 4 * 6 * 4 + 3 * 16 + 4
    assert np.array_equal(zarr.open_group(str(out), mode="r")["v"][...], data)


def test_one_chunk_of_a_shard_reads_by_range(tmp_path: Path) -> None:
    """A 7,300-chunk variable (20 years of daily chunks) in shards of 365: 20 objects; one chunk read through our
    reader costs the index and that chunk, not the shard (bytes counted at the store); zarr-python reads all."""
    from nczarr_conformance import open as lazy_open
    from nczarr_conformance.stores.directory import DirectoryStore

    src = tmp_path / "big.nc"
    with netCDF4.Dataset(src, "w") as nc:
        nc.createDimension("t", 7300)
        nc.createVariable("v", "f8", ("t",), chunksizes=(1,))[:] = np.arange(7300.0)
    out = tmp_path / "o.zarr"
    assert run_cli("--quiet", "--zarr-format", "3", "--shard", "365", str(src), str(out)).returncode == 0
    assert sorted(p.name for p in (out / "v" / "c").rglob("*") if p.is_file()) == sorted(str(i) for i in range(20))
    assert np.array_equal(zarr.open_group(str(out), mode="r")["v"][...], np.arange(7300.0))
    counted: list[int] = []
    real = DirectoryStore.get_range

    def counting(self: Any, key: str, start: int, length: int) -> Any:
        got = real(self, key, start, length)
        if got is not None:
            counted.append(len(got[0]))
        return got

    DirectoryStore.get_range = counting  # type: ignore[method-assign]
    try:
        ds = lazy_open(str(out))
        assert float(ds["v"][4000]) == 4000.0
    finally:
        DirectoryStore.get_range = real  # type: ignore[method-assign]
    assert sum(counted) == 365 * 16 + 4 + 8, counted  # the index (+ crc32c), then one 8-byte chunk


# ---- direct copy from HDF5 ---------------------------------------------------------------------------

def test_deflate_chunks_are_copied_as_gzip_without_deflating_again(source: Path, converted: Any) -> None:
    """The deflate-only variable's chunks hold HDF5's own deflate bytes (h5py ``read_direct_chunk``) inside a
    gzip frame; the shuffled one is re-encoded (blosc). The summary counts the copied chunks."""
    out, done = converted
    with h5py.File(source, "r") as f:
        z = f["z"]
        for i in range(z.shape[0]):
            _, raw = z.id.read_direct_chunk((i, 0))
            ours = (out / "z" / "c" / str(i) / "0").read_bytes()
            assert ours[:2] == b"\x1f\x8b" and ours[10:-8] == bytes(raw)[2:-4], i  # same deflate stream
            assert zlib.decompress(bytes(raw)) == zlib.decompress(ours, 31)
    copyable = 0  # stored chunks of numeric datasets whose HDF5 filters are none or deflate alone (h5py)
    with h5py.File(source, "r") as f:
        for obj in f.values():
            if isinstance(obj, h5py.Dataset) and obj.chunks and obj.dtype.kind in "iuf" and \
                    obj.compression in (None, "gzip") and not obj.shuffle and not obj.fletcher32:
                copyable += obj.id.get_num_chunks()
    assert copyable == 6  # z's 4 (deflate, rewrapped) and f's 2 (no filter)
    assert f"({15} chunks, {copyable} copied compressed)" in done.stderr.splitlines()[-1], done.stderr


def test_rewrap_refuses_what_is_not_a_plain_zlib_stream() -> None:
    from nczarr_conformance.zarr3.writer import zlib_to_gzip

    data = b"abc" * 100
    good = zlib.compress(data, 6)
    assert zlib.decompress(zlib_to_gzip(good, len(data)) or b"", 31) == data
    assert zlib_to_gzip(good[:-1] + bytes([good[-1] ^ 1]), len(data)) is None  # Adler-32 wrong
    assert zlib_to_gzip(good, len(data) - 1) is None  # more than the chunk holds
    assert zlib_to_gzip(b"\x1f\x8b" + good[2:], len(data)) is None  # not a zlib header


# ---- zip, S3, the API ---------------------------------------------------------------------------------

def test_zip_store_reads_in_zarr_python(source: Path, expected: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "o.zip"
    assert run_cli("--quiet", "--zarr-format", "3", str(source), str(out)).returncode == 0
    store = zarr.storage.ZipStore(str(out), mode="r")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        group = zarr.open_group(store, mode="r")
        for key, values in expected.items():
            assert _same(group[key.lstrip("/")][...], values), key
    # our reader finds the root where zarr-python does, although entry 0 is not the root's zarr.json
    import zipfile

    from nczarr_conformance.stores import open_store
    from nczarr_conformance.zarr3.reader import read_any

    with zipfile.ZipFile(out) as zf:
        assert zf.infolist()[0].filename != "zarr.json" and "zarr.json" in zf.namelist()
    with open_store(str(out)) as ours:
        back = read_any(ours)
    for key, values in expected.items():
        assert _same(_model_var(back, key).data, values), key


@pytest.mark.s3
def test_s3_store_reads_back(source: Path, expected: dict[str, Any], s3_bucket: str, moto_server: str) -> None:
    from nczarr_conformance.stores import open_store
    from nczarr_conformance.zarr3.reader import read_any

    url = f"s3://{s3_bucket}/v3"
    done = run_cli("--quiet", "--zarr-format", "3", "--shard", "2", str(source), url)
    assert done.returncode == 0, done.stderr
    with open_store(url) as store:
        back = read_any(store)
    for key, values in expected.items():
        assert _same(_model_var(back, key).data, values), key
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        group = zarr.open_group(f"s3://{s3_bucket}/v3", mode="r",
                                storage_options={"endpoint_url": moto_server, "anon": False})
        assert _same(group["f"][...], expected["/f"])


def test_write_api_zarr_format_3(tmp_path: Path, small: Any) -> None:
    import nczarr_conformance

    out = tmp_path / "api.zarr"
    with pytest.warns(UserWarning, match="unlimited dimensions"):
        nczarr_conformance.write(small, out, zarr_format=3)
    group = zarr.open_group(str(out), mode="r")
    assert group["v"][...].tolist() == small.root.variables["v"].data.tolist()
    assert group["g/w"].metadata.dimension_names == ("x", "y")


# ---- Hypothesis: models through a directory, a zip and moto S3 -------------------------------------------

_HYPOTHESIS_RUNS = itertools.count()


@pytest.mark.s3
@pytest.mark.parametrize("kind", ["dir", "zip", "s3"])
@settings(max_examples=15 if not in_ci() else 40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_models_round_trip_through_v3(kind: str, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory,
                                      s3_bucket: str, moto_server: str) -> None:
    """Any model the strategies draw: written as v3 into a directory, a zip or S3, read back equal
    (values, attributes) by zarr-python through that store, whose stored ``zarr.json`` documents
    hold the chunk shape, byte order and fill the model asked for; our reader reads it equal too."""
    from nczarr_conformance.stores import open_store
    from nczarr_conformance.testing.strategies import datasets
    from nczarr_conformance.zarr3.reader import read_any
    from nczarr_conformance.zarr3.writer import write_dataset

    ds = data.draw(datasets(max_depth=1))
    shard = data.draw(st.sampled_from([None, 2]))
    if kind == "s3":
        url = f"s3://{s3_bucket}/hyp{next(_HYPOTHESIS_RUNS)}"
    else:
        url = str(tmp_path_factory.mktemp("hyp") / ("o.zip" if kind == "zip" else "o.zarr"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with open_store(url, "w") as store:
            write_dataset(ds, store, shard=shard)
        with open_store(url) as store:
            ours = read_any(store)
            stored = {k: json.loads(store.get(k) or b"{}") for k in store.list_prefix("/") if k.endswith("zarr.json")}
        if kind == "zip":
            zstore: Any = zarr.storage.ZipStore(url, mode="r")
        elif kind == "s3":
            zstore = zarr.storage.FsspecStore.from_url(
                url, storage_options={"endpoint_url": moto_server, "anon": False}, read_only=True)
        else:
            zstore = url
        root = zarr.open_group(zstore, mode="r")
        for gkey, group in ds.root.walk():
            for name, var in group.variables.items():
                key = f"{gkey.strip('/')}/{name}".lstrip("/")
                arr = root[key]
                assert arr.shape == tuple(var.shape), key
                want = np.asarray(var.data)
                got = arr[...]
                mine = _model_var(ours, "/" + key)
                if var.type == "char":
                    assert [bytes(v).rstrip(b"\0") for v in got.ravel()] == \
                        [bytes(v).rstrip(b"\0") for v in want.ravel()], key
                    assert np.array_equal(np.asarray(mine.data), want), key
                else:
                    assert _same(got, want), key
                    assert _same(mine.data, want), key
                if var.chunks and not var.is_scalar:
                    assert arr.chunks == tuple(int(c) for c in var.chunks), key
                meta = stored[f"/{key}/zarr.json"]
                codecs = meta["codecs"]
                sharded = codecs[0]["name"] == "sharding_indexed"
                # docs/writer.md: shards along the first dimension; a scalar or an empty first dimension has none
                assert sharded == bool(shard and not var.is_scalar and var.shape[0] > 0), key
                inner = codecs[0]["configuration"]["codecs"] if sharded else codecs
                if var.endianness == "big" and want.dtype.itemsize > 1 and var.type not in ("string", "char"):
                    assert inner[0]["configuration"]["endian"] == "big", key
                if var.type not in ("string", "char") and "_FillValue" in var.attributes:
                    fill = np.asarray(var.attributes["_FillValue"].value).ravel()[0]
                    assert _same(np.asarray(arr.fill_value), np.asarray(fill, dtype=want.dtype)), key
                for aname in var.attributes:
                    if aname != "_FillValue" and not aname.startswith("_nczarr"):
                        assert aname in arr.attrs, (key, aname)


def test_our_reader_reads_what_we_wrote_like_zarr_python(source: Path, converted: Any) -> None:
    """Types and dimensions through our reader: the dimension names zarr-python reports, netCDF4's types."""
    out, _ = converted
    from nczarr_conformance.stores import open_store
    from nczarr_conformance.zarr3.reader import read_any

    with open_store(str(out)) as store:
        back = read_any(store, data=False)
    group = zarr.open_group(str(out), mode="r")
    with netCDF4.Dataset(source) as nc:
        for name, var in nc.variables.items():
            mine = back.root.variables[name]
            names = group[name].metadata.dimension_names or ()
            assert tuple(d.rsplit("/", 1)[-1] for d in mine.dimensions) == tuple(names) == var.dimensions, name
            assert mine.type == {"S": "char", "U": "string", "O": "string"}.get(
                np.dtype(var.dtype).kind, mine.type), name
            if "_FillValue" in var.ncattrs():  # written as xarray encodes it (base64 for floats and bytes)
                want = var.getncattr("_FillValue")
                got = mine.attributes["_FillValue"].value
                got = got if isinstance(got, str) else np.asarray(got).ravel()[0]
                assert (got == want.decode() if isinstance(want, bytes)
                        else np.array_equal(float(got), float(want), equal_nan=True)), name


# ---- --overwrite of a v3 store ------------------------------------------------------------------------------

@pytest.mark.parametrize("flavor", ["zarr", "nz", "nczarr-v3-draft"])
def test_overwrite_replaces_a_v3_dataset_and_refuses_a_foreign_file(source: Path, converted: Any, tmp_path: Path,
                                                                    flavor: str) -> None:
    """A v3 dataset (zarr.json nodes, c/… chunk keys) is a dataset --overwrite may replace, in every v3
    flavor; a file that is no part of it still stops the overwrite, leaving both as they were."""
    out = tmp_path / "o.zarr"
    # NZ-1.0 holds no char variable (refused: tests/zarr3/test_nz.py): the source's others
    only = ["-V", "f,z,zs,b,u,st,sc,nan,/g/w"] if flavor == "nz" else []
    runs = 2
    if flavor == "zarr":  # the converted fixture is this dataset already (v3's default flavor): replace a copy
        shutil.copytree(converted[0], out)
        assert run_main(dump.main, ["-K", str(out)]).stdout == "zarr zarr-v3\n"
        runs = 1
    for _ in range(runs):
        done = run_cli("--quiet", "--zarr-format", "3", "--flavor", flavor, *only, "--overwrite", str(source),
                       str(out))
        assert done.returncode == 0, done.stderr
    (out / "notes.txt").write_text("mine")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    done = run_cli("--quiet", "--zarr-format", "3", "--flavor", flavor, *only, "--overwrite", str(source), str(out))
    assert done.returncode == 2 and "holds notes.txt, which is not part of a Zarr dataset" in done.stderr
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


@pytest.mark.s3
def test_overwrite_of_a_v3_dataset_on_s3_holds_its_metadata_to_the_end(source: Path, expected: dict[str, Any],
                                                                        s3_bucket: str, moto_server: str) -> None:
    """On S3 a v3 overwrite replaces the old dataset; zarr.json objects are metadata as .zarray is, put
    after every chunk and the root's last (the order the S3 store's requests show)."""
    import boto3

    from nczarr_conformance.stores import open_store
    from nczarr_conformance.zarr3.reader import read_any

    url = f"s3://{s3_bucket}/v3"
    for _ in range(2):
        done = run_cli("--quiet", "--zarr-format", "3", "--overwrite", str(source), url)
        assert done.returncode == 0, done.stderr
    client = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")
    client.put_object(Bucket=s3_bucket, Key="v3/notes.txt", Body=b"mine")
    done = run_cli("--quiet", "--zarr-format", "3", "--overwrite", str(source), url)
    assert done.returncode == 2 and "notes.txt" in done.stderr
    with open_store(url) as store:
        back = read_any(store)
    for key, values in expected.items():
        assert _same(_model_var(back, key).data, values), key
    with open_store(f"s3://{s3_bucket}/order", "w") as store:  # what the commit will put, in its order
        for key in ("/zarr.json", "/g/zarr.json", "/g/v/zarr.json", "/g/v/c/0"):
            store.put(key, b"{}")
        assert store._metadata_order() == ["/g/v/zarr.json", "/g/zarr.json", "/zarr.json"]  # type: ignore[attr-defined]


def test_the_objects_of_a_v3_dataset_are_its_nodes_and_their_chunk_keys() -> None:
    """What --overwrite and a dead writer's cleanup may remove: zarr.json nodes linked to the root and,
    below each, keys of the default (c/0/1, c.0.1, a scalar's c) or v2 (0.1, 0/1) chunk key encodings."""
    from nczarr_conformance.safety import split_dataset_keys

    owned, foreign = split_dataset_keys(["/zarr.json", "/a/zarr.json", "/a/c/0/1", "/a/c.0.1", "/s/zarr.json",
                                         "/s/c", "/v/zarr.json", "/v/0.1", "/v/0/1", "/g/zarr.json",
                                         "/g/x/zarr.json", "/g/x/c/0", "/a/c/x", "/a/d/0", "/orphan/c/0",
                                         "/a/notes.txt"])
    assert foreign == ["/a/c/x", "/a/d/0", "/a/notes.txt", "/orphan/c/0"]
    assert len(owned) == 12
