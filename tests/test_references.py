"""``nc2nczarr --reference``: kerchunk references into the source file, read by xarray, zarr-python 3 and us.

Expected values come from the source file through netCDF4-python (our model of it, or xarray's
netCDF4 backend) and the storage from h5py's own chunk index, never from the writer under test.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.errors import StoreError
from nczarr_conformance.model import diff
from nczarr_conformance.sources import netcdf4 as nc4
from tests.cf_sources import chunks_match_hdf5, write_cf
from tests.conftest import CORPUS

h5py = pytest.importorskip("h5py")
fsspec = pytest.importorskip("fsspec")

#: Zarr has no contiguous layout: a contiguous dataset is one reference of its whole extent
CONTIGUOUS = {"contiguous": "a contiguous dataset is one Zarr chunk of its whole shape (one reference)"}


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, env=env, timeout=300)


def _nc2nczarr(*args: str) -> subprocess.CompletedProcess[str]:
    return _run("nczarr_conformance.cli.convert", *args)


@pytest.fixture
def rich(tmp_path: Path) -> Path:
    """corpus/rich.nc copied: a target the test may change."""
    path = tmp_path / "rich.nc"
    shutil.copy(CORPUS / "rich.nc", path)
    return path


@pytest.fixture
def cf_file(tmp_path: Path) -> Path:
    """A CF-like netCDF-4 file: packed data with _FillValue, a noleap time axis, a char variable, a
    compressed chunked variable (shuffle + deflate) and contiguous ones."""

    return write_cf(tmp_path / "cf.nc", station=True)


def _refs(path: Path) -> dict[str, Any]:
    refs: dict[str, Any] = json.loads(path.read_text())["refs"]
    return refs


# ---- our reader ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".json", ".parq"])
def test_our_reader_reads_rich_references_as_netcdf4_reads_the_source(rich: Path, tmp_path: Path, suffix: str):
    out = tmp_path / f"rich{suffix}"
    done = _nc2nczarr(str(rich), str(out), "--reference", "--char-as", ">S1")
    assert done.returncode == 0, done.stderr
    assert diff(nc4.read(str(rich)), open_dataset(str(out)), ignore=CONTIGUOUS) == []


def test_by_default_char_is_S1_for_xarray_marked_char_and_read_back_as_netcdf4_reads_it(rich: Path, tmp_path: Path):
    """|S1 by default (xarray and zarr-python 3 refuse >S1), marked char in _nczarr_array (|S1 alone is NCZarr's
    string of length 1): our reader reads the references as netCDF4-python reads the file (docs/references.md)."""
    out = tmp_path / "rich.json"
    assert _nc2nczarr(str(rich), str(out), "--reference").returncode == 0
    assert json.loads(_refs(out)["chars/.zarray"])["dtype"] == "|S1"
    assert json.loads(_refs(out)["chars/.zattrs"])["_nczarr_array"]["nczarr_type"] == "char"
    source = nc4.read(str(rich))
    assert source.root.variables["chars"].type == "char"
    assert diff(source, open_dataset(str(out)), ignore=CONTIGUOUS) == []


# ---- storage: h5py's chunk index -----------------------------------------------------------------------------
def test_every_chunk_is_the_hdf5_chunk_h5py_indexes_with_its_codecs(rich: Path, tmp_path: Path):
    out = tmp_path / "rich.json"
    assert _nc2nczarr(str(rich), str(out), "--reference").returncode == 0
    refs = _refs(out)
    seen = chunks_match_hdf5(refs, rich, str(rich))
    assert seen == 29 and any(isinstance(v, list) for k, v in refs.items() if k.startswith("be_float/"))


def test_a_contiguous_dataset_is_one_reference_and_a_compact_one_is_inlined(tmp_path: Path):
    src = tmp_path / "layouts.nc"
    with h5py.File(src, "w") as f:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)
        compact = h5py.h5d.create(f.id, b"compact", h5py.h5t.NATIVE_INT32, h5py.h5s.create_simple((4,)), dcpl)
        compact.write(h5py.h5s.ALL, h5py.h5s.ALL, np.arange(4, dtype="i4"))
        f.create_dataset("contiguous", data=np.arange(10.0))
    out = tmp_path / "layouts.json"
    done = _nc2nczarr(str(src), str(out), "--reference")
    assert done.returncode == 0, done.stderr
    assert "/compact: written inline, 16 bytes: a compact dataset" in done.stderr
    refs = _refs(out)
    assert refs["compact/0"].startswith("base64:")
    with h5py.File(src, "r") as f:
        assert refs["contiguous/0"] == [str(src), f["contiguous"].id.get_offset(), 80]
    read = open_dataset(str(out))
    assert read.root.variables["compact"].data.tolist() == [0, 1, 2, 3]
    assert read.root.variables["contiguous"].data.tolist() == np.arange(10.0).tolist()


def test_more_inline_bytes_than_the_bound_is_refused_naming_the_variable(rich: Path, tmp_path: Path):
    from nczarr_conformance.conversion.references import convert_references
    from nczarr_conformance.errors import UnsupportedError

    out = tmp_path / "rich.json"
    with pytest.raises(UnsupportedError, match=r"/strings: cannot be referenced \(variable-length strings"):
        convert_references(str(rich), str(out), inline_limit=500)
    assert not out.exists() and os.listdir(tmp_path) == ["rich.nc"]


def test_szip_is_refused_by_name_and_nothing_is_written(tmp_path: Path):
    import netCDF4

    if not h5py.h5z.filter_avail(4):
        pytest.skip("this HDF5 has no szip")
    src = tmp_path / "sz.nc"
    with netCDF4.Dataset(src, "w") as ds:
        ds.createDimension("x", 64)
        ds.createVariable("v", "f4", ("x",), compression="szip", szip_coding="nn")[:] = np.arange(64)
    out = tmp_path / "sz.json"
    done = _nc2nczarr(str(src), str(out), "--reference")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "/v: szip (HDF5 filter 4)" in done.stderr, done.stderr
    assert sorted(os.listdir(tmp_path)) == ["sz.nc"]


# ---- peers: xarray and zarr-python 3 --------------------------------------------------------------------------
def _xr_refs(out: Path) -> Any:
    import xarray as xr

    return xr.open_dataset("reference://", engine="zarr",
                           backend_kwargs={"storage_options": {"fo": str(out)}, "consolidated": False})


@pytest.mark.parametrize("suffix", [".json", ".parq"])
def test_xarray_reads_cf_references_as_it_reads_the_file(cf_file: Path, tmp_path: Path, suffix: str):
    xr = pytest.importorskip("xarray")
    out = tmp_path / f"cf{suffix}"
    done = _nc2nczarr(str(cf_file), str(out), "--reference")
    assert done.returncode == 0, done.stderr
    with xr.open_dataset(cf_file, engine="netcdf4") as source, _xr_refs(out) as refs:
        assert refs.drop_vars("station").identical(source.drop_vars("station")), (refs, source)
        assert refs["time"].dt.calendar == "noleap" and refs["tas"].dtype == source["tas"].dtype
        assert int(refs["tas"].isnull().sum()) == int(source["tas"].isnull().sum()) > 0
        # the one difference, exactly (docs/references.md): a Zarr v2 char array's fill_value is NUL, which
        # xarray's zarr backend takes for _FillValue, so the empty name reads as missing; the netCDF4 backend
        # masks only with a _FillValue attribute, which the source has not
        assert "_FillValue" not in source["station"].encoding
        assert refs["station"].encoding["_FillValue"] == b""
        assert source["station"].values.tolist() == [b"ab", b"cde", b"", b"fghij"]
        assert [str(v) for v in refs["station"].values.tolist()] == ["b'ab'", "b'cde'", "nan", "b'fghij'"]


def test_xarray_reads_rich_references_as_it_reads_the_copied_store(rich: Path, tmp_path: Path):
    """rich.nc holds what xarray's zarr backend reads otherwise than its netCDF4 one (unsigned fills,
    strings, NCZarr scalars: the matrix's xarray row): through references it reads exactly as through
    the store nc2nczarr copies, chunk for chunk."""
    xr = pytest.importorskip("xarray")
    out, copied = tmp_path / "rich.json", tmp_path / "rich.zarr"
    assert _nc2nczarr(str(rich), str(out), "--reference").returncode == 0
    assert _nc2nczarr(str(rich), str(copied), "--char-as", "S1", "-q").returncode == 0
    with xr.open_dataset(copied, engine="zarr", consolidated=False) as store, _xr_refs(out) as refs:
        assert refs.identical(store)


def test_zarr_python_reads_references_through_fsspec_store(cf_file: Path, tmp_path: Path):
    zarr = pytest.importorskip("zarr")
    import netCDF4
    from zarr.storage import FsspecStore

    out = tmp_path / "cf.json"
    assert _nc2nczarr(str(cf_file), str(out), "--reference").returncode == 0
    fs = fsspec.filesystem("reference", fo=str(out), asynchronous=True)
    group = zarr.open_group(FsspecStore(fs, read_only=True, path=""), mode="r", use_consolidated=False)
    with netCDF4.Dataset(cf_file) as ds:
        ds.set_auto_maskandscale(False)
        for name in ("time", "lat", "tas", "station"):
            expected = np.asarray(ds[name][:])
            got = group[name][:]
            assert got.dtype == expected.dtype and np.array_equal(got, expected), name


@pytest.fixture
def nested_refs(tmp_path: Path) -> Path:
    """``nc2nczarr --reference`` of a netCDF-4 file with an array in a sub-group (/g1/w)."""
    import netCDF4

    source, out = tmp_path / "nested.nc", tmp_path / "nested.json"
    with netCDF4.Dataset(source, "w") as nc:
        nc.createDimension("x", 2)
        nc.createGroup("g1").createVariable("w", "i2", ("x",))[...] = [1, 2]
    assert _nc2nczarr(str(source), str(out), "--reference").returncode == 0
    return out


def _zarr_python_group(out: Path) -> Any:
    zarr = pytest.importorskip("zarr")
    from zarr.storage import FsspecStore

    fs = fsspec.filesystem("reference", fo=str(out), asynchronous=True)
    return zarr.open_group(FsspecStore(fs, read_only=True, path=""), mode="r", use_consolidated=False)


def test_zarr_python_reads_a_sub_group_array_of_references_by_its_path(nested_refs: Path):
    """The precondition of the xfail below: the references hold /g1/w, fsspec lists it, zarr-python reads it."""
    fs = fsspec.filesystem("reference", fo=str(nested_refs))
    assert "g1/w" in fs.ls("g1", detail=False)
    assert _zarr_python_group(nested_refs)["g1/w"][...].tolist() == [1, 2]


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "zarr-python 3.1 FsspecStore.list_dir joins a store path of '' as '/g1', which fsspec's reference filesystem "
    "does not know: a sub-group of references lists no members (3.4's list_dir strips the root; the matrix's "
    "ours-references/kerchunk-hdf5 -> zarr-python groups-nested cells miss /g1's arrays for it)"))
def test_zarr_python_lists_the_members_of_a_sub_group_of_references(nested_refs: Path):
    assert [name for name, _ in _zarr_python_group(nested_refs)["g1"].members()] == ["w"]


# ---- a target changed or gone ---------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".json", ".parq"])
def test_a_changed_target_is_found_by_check_and_refused_by_our_reader(rich: Path, tmp_path: Path, suffix: str):
    out = tmp_path / f"rich{suffix}"
    assert _nc2nczarr(str(rich), str(out), "--reference").returncode == 0
    assert _run("nczarr_conformance.cli.check", str(out), "--select", "NCZ-REF").returncode == 0
    stat = rich.stat()
    os.utime(rich, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # rewritten in place: same size
    checked = _run("nczarr_conformance.cli.check", str(out), "--select", "NCZ-REF")
    assert checked.returncode == 1
    assert f"NCZ-REF-TARGET -: target {rich} changed since the references were made" in checked.stdout
    dumped = _run("nczarr_conformance.cli.dump", str(out))
    assert dumped.returncode == 2 and dumped.stdout == ""
    assert dumped.stderr.count("\n") == 1 and f"target {rich} changed" in dumped.stderr
    with pytest.raises(StoreError, match="changed since the references were made"):
        open_dataset(str(out))


def test_a_missing_target_is_named_by_check(rich: Path, tmp_path: Path):
    out = tmp_path / "rich.json"
    assert _nc2nczarr(str(rich), str(out), "--reference").returncode == 0
    rich.unlink()
    checked = _run("nczarr_conformance.cli.check", str(out), "--select", "NCZ-REF")
    assert checked.returncode == 1 and f"target {rich} is not reachable" in checked.stdout
    with pytest.raises(StoreError, match=f"target {rich} is not reachable"):
        open_dataset(str(out))


def test_check_finds_ranges_outside_the_target_and_codecs_other_than_hdf5s(rich: Path, tmp_path: Path):
    """References edited as another tool might write them (no recorded targets): the file itself judges."""
    out = tmp_path / "rich.json"
    assert _nc2nczarr(str(rich), str(out), "--reference").returncode == 0
    doc = json.loads(out.read_text())
    del doc["nczarr:targets"]
    doc["refs"]["v_i4/0"][1] = rich.stat().st_size
    doc["refs"]["be_float/.zarray"] = doc["refs"]["be_float/.zarray"].replace('"zlib"', '"bz2"')
    out.write_text(json.dumps(doc))
    checked = _run("nczarr_conformance.cli.check", str(out), "--select", "NCZ-REF")
    assert checked.returncode == 1
    assert f"error NCZ-REF-RANGE /v_i4/0: reads bytes {rich.stat().st_size}-" in checked.stdout
    assert "error NCZ-REF-CODECS /be_float: declares codecs ['shuffle', 'bz2'] but" in checked.stdout


def test_the_nczarr_engine_and_open_read_references_and_refuse_a_changed_target(cf_file: Path, tmp_path: Path):
    xr = pytest.importorskip("xarray")
    import nczarr_conformance

    out = tmp_path / "cf.json"
    assert _nc2nczarr(str(cf_file), str(out), "--reference").returncode == 0
    with xr.open_dataset(cf_file, engine="netcdf4") as source, xr.open_dataset(out, engine="nczarr") as refs:
        # station: |S1 is read as netcdf-c reads it, strings of one character (see the default char test)
        assert refs.drop_vars("station").identical(source.drop_vars("station"))
    import netCDF4

    with netCDF4.Dataset(cf_file) as ds:
        ds.set_auto_maskandscale(False)
        expected = ds["tas"][2, 1, :]
    assert np.array_equal(nczarr_conformance.open(str(out))["tas"][2, 1, :], expected)
    os.utime(cf_file, ns=(0, 0))
    with pytest.raises(StoreError, match=f"target {cf_file} changed since the references were made"):
        xr.open_dataset(out, engine="nczarr")
    with pytest.raises(StoreError, match=f"target {cf_file} changed"):
        nczarr_conformance.open(str(out))


def test_a_path_ending_json_names_references_unless_it_is_a_zarr_directory(tmp_path: Path):
    from nczarr_conformance.urls import parse

    assert parse(str(tmp_path / "refs.json")).kind == "reference"
    assert parse(str(tmp_path / "refs.parq")).kind == "reference"
    store = tmp_path / "store.json"
    store.mkdir()
    (store / ".zgroup").write_text('{"zarr_format": 2}')
    assert parse(str(store)).kind == "file"


def test_our_reference_writer_is_a_missing_tool_where_fsspec_is(monkeypatch):
    """A plain install (no [references] extra) has no fsspec to read references: the matrix's ours-references
    is then a missing tool (its cells skipped, naming the extra), never "ours fails" (tests/packaging/test_wheel.py
    runs the report so)."""
    import importlib.util

    from nczarr_conformance.peers.ours_references import OursReferences

    assert OursReferences().available() is None
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "fsspec" else real(name, *a))
    assert OursReferences().available() == "fsspec not installed (the [references] extra)"


# ---- hostile references: special files as targets (never hang, never read unbounded) ------------------------------
def _one_array_refs(path: Path, ref: list[Any]) -> Path:
    """kerchunk references of one 4-float array whose only chunk is ``ref``."""
    doc = {"version": 1, "refs": {
        ".zgroup": json.dumps({"zarr_format": 2}),
        "v/.zarray": json.dumps({"zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "<f4", "compressor": None,
                                 "filters": None, "fill_value": 0, "order": "C"}),
        "v/.zattrs": json.dumps({"_ARRAY_DIMENSIONS": ["x"]}), "v/0": ref}}
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
@pytest.mark.parametrize("whole", [True, False], ids=["whole-file", "range"])
def test_a_special_file_target_is_refused_in_one_line_never_read(tmp_path: Path, target: str, whole: bool):
    """/dev/zero as a whole-file reference was read for ever; a FIFO's open waits for a writer: both are named and
    refused before a byte is read, by nczarr-dump (exit 2) and by nczarr-check's NCZ-REF-TARGET (exit 1)."""
    if target == "fifo":
        target = str(tmp_path / "pipe")
        os.mkfifo(target)
    refs = _one_array_refs(tmp_path / "r.json", [target] if whole else [target, 0, 16])
    kind = "character device" if target == "/dev/zero" else "FIFO"
    done = _run("nczarr_conformance.cli.dump", str(refs))
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"nczarr-dump: {refs}: target {target} is a {kind}, not a regular file: refused; "
                           "nothing read from it\n")
    checked = _run("nczarr_conformance.cli.check", str(refs))
    assert checked.returncode == 1 and "NCZ-REF-TARGET" in checked.stdout and kind in checked.stdout, checked.stdout


def test_a_whole_file_reference_reads_the_file_and_no_more_than_its_size(tmp_path: Path):
    values = np.arange(4, dtype="<f4")
    (tmp_path / "chunk.bin").write_bytes(values.tobytes())
    refs = _one_array_refs(tmp_path / "r.json", [str(tmp_path / "chunk.bin")])
    np.testing.assert_array_equal(open_dataset(str(refs)).root.variables["v"].data, values)


@pytest.mark.parametrize("ref", [["T", -5, 16], ["T", 0, -1], ["T", "0", "16"], ["T", 0.5, 16], ["T", 0, 16, 99],
                                 ["T", True, 16], [""], 5],
                         ids=["negative-offset", "negative-length", "text-numbers", "float", "four-items", "bool",
                              "empty-url", "number"])
def test_a_malformed_reference_is_one_line_and_an_nczarr_check_finding(tmp_path: Path, ref: Any):
    """kerchunk's forms are inline text, [url] and [url, offset, length] (whole numbers ≥ 0): anything else was
    "unexpected …: this is a bug" from nczarr-dump and a crashed rule in nczarr-check."""
    target = tmp_path / "data.bin"
    target.write_bytes(bytes(range(32)))
    ref = [str(target) if x == "T" else x for x in ref] if isinstance(ref, list) else ref
    refs = _one_array_refs(tmp_path / "r.json", ref)
    done = _run("nczarr_conformance.cli.dump", str(refs))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"nczarr-dump: {refs}: /v/0: malformed reference ") and done.stderr.count("\n") == 1
    checked = _run("nczarr_conformance.cli.check", str(refs))
    assert checked.returncode == 1 and "NCZ-CHECK-CRASH" not in checked.stdout, checked.stdout
    assert "error NCZ-REF-RANGE /v/0: malformed reference " in checked.stdout, checked.stdout


def test_an_unreachable_remote_target_is_one_line_naming_it(tmp_path: Path):
    with __import__("socket").socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/gone.nc"
    refs = _one_array_refs(tmp_path / "r.json", [url, 0, 16])
    done = _run("nczarr_conformance.cli.dump", str(refs))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"nczarr-dump: {refs}: /v/0: target {url} not reachable (")
    assert done.stderr.count("\n") == 1 and "bug" not in done.stderr


def test_an_empty_reference_is_one_line_before_anything_is_read(tmp_path: Path):
    """fsspec's reference filesystem cannot even open references holding ``[]`` (IndexError): one line naming them."""
    refs = _one_array_refs(tmp_path / "r.json", [])
    for command, code in (("dump", 2), ("check", 2)):
        done = _run(f"nczarr_conformance.cli.{command}", str(refs))
        assert done.returncode == code, (done.stdout, done.stderr)
        assert "not kerchunk references (list index out of range)" in done.stdout + done.stderr
        assert "bug" not in done.stderr


def test_for_xarray_on_the_command_line_writes_xarrays_layout_and_refuses_what_references_cannot_give(
        cf_file: Path, tmp_path: Path):
    """``--reference --for xarray``: null default fills where the source has no _FillValue, every chunk still a
    reference, and xarray reads tas and time as from the file; ``--for netcdf-c-4.9`` needs the codecs dropped:
    one line, exit 2."""
    out = tmp_path / "x.json"
    done = _nc2nczarr(str(cf_file), str(out), "--reference", "--for", "xarray", "-q")
    assert done.returncode == 0, done.stderr
    refs = _refs(out)
    import netCDF4

    with netCDF4.Dataset(cf_file) as ds:
        assert "_FillValue" not in ds["time"].ncattrs()  # the precondition: no fill of its own
    assert json.loads(refs["time/.zarray"])["fill_value"] is None
    assert isinstance(refs["tas/0.0.0"], list) and refs["tas/0.0.0"][0] == str(cf_file)
    import xarray as xr

    with xr.open_dataset(cf_file, engine="netcdf4") as want, _xr_refs(out) as got:
        for name in ("tas", "time", "lat"):
            xr.testing.assert_identical(got[name].load(), want[name].load())
    refused = _nc2nczarr(str(cf_file), str(tmp_path / "c.json"), "--reference", "--for", "netcdf-c-4.9")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "references keep the file's chunks and codecs as stored" in refused.stderr
    assert not (tmp_path / "c.json").exists()


def test_for_xarray_refuses_naming_what_xarray_would_read_otherwise_and_accept_losses_writes_it(tmp_path: Path):
    """A float32 ``scale_factor`` (xarray's zarr engine reads it as a JSON float64, so the variable decodes to
    float64 where its netcdf4 engine gives float32): refused in one line naming the attribute, exit 2, nothing
    written; ``--accept-losses`` writes the references and says the loss and where, even with -q."""
    import netCDF4

    src = tmp_path / "packed.nc"
    with netCDF4.Dataset(src, "w") as nc:
        nc.createDimension("x", 3)
        v = nc.createVariable("t", "i2", ("x",), fill_value=np.int16(-1))
        v.scale_factor = np.float32(0.5)
        v[:] = np.array([1.0, 2.0, 3.0])
    out = tmp_path / "p.json"
    refused = _nc2nczarr(str(src), str(out), "--reference", "--for", "xarray")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "/t attribute scale_factor" in refused.stderr and "--accept-losses" in refused.stderr
    assert not out.exists()
    written = _nc2nczarr(str(src), str(out), "--reference", "--for", "xarray", "--accept-losses", "-q")
    assert written.returncode == 0, written.stderr
    assert "xarray loses: reads 32-bit float attributes as 64-bit" in written.stderr
    assert "in /t attribute scale_factor" in written.stderr
    import xarray as xr

    with xr.open_dataset(src, engine="netcdf4") as want, _xr_refs(out) as got:
        assert want["t"].dtype == np.float32 and got["t"].dtype == np.float64  # the loss said, as xarray has it
    lone = _nc2nczarr(str(src), str(tmp_path / "q.json"), "--reference", "--accept-losses")
    assert lone.returncode == 2 and "--accept-losses goes with --reference --for" in lone.stderr


def test_our_reference_writers_take_one_case_at_a_time_on_the_matrix_threads(tmp_path: Path, monkeypatch) -> None:
    """netcdf-c is not thread-safe: the matrix's threads running ours-references and ours-icechunk together crashed
    the interpreter in netCDF4's close (peers/ours_references._ONE_CASE). Two writes started at once on two threads
    never overlap; both still write."""
    import threading
    import time

    from nczarr_conformance.model import Dataset, Group
    from nczarr_conformance.peers import ours_references

    inside: list[int] = []
    overlapped: list[bool] = []

    def convert(self: Any, source: str, out: Path) -> None:
        inside.append(1)
        overlapped.append(len(inside) > 1)
        time.sleep(0.2)
        out.write_text("{}")
        inside.pop()

    monkeypatch.setattr(ours_references.OursReferences, "convert", convert)
    monkeypatch.setattr(ours_references.OursIcechunkReferences, "convert", convert)
    writers = [ours_references.OursReferences(), ours_references.OursIcechunkReferences()]
    failed: list[BaseException] = []

    def write(writer: Any, i: int) -> None:
        try:
            writer.write(Dataset(Group()), tmp_path / f"case{i}", {})
        except BaseException as exc:  # shown by the assertion below
            failed.append(exc)

    threads = [threading.Thread(target=write, args=(w, i)) for i, w in enumerate(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failed == []
    assert overlapped == [False, False]
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["case0.json", "case1.icechunk"]
