"""What the writer puts beside the NCZarr keys so every reader opens it: _ARRAY_DIMENSIONS in every group,
a consolidated .zmetadata written last, char as the dtype each reader family takes. Expected layouts come from
the peers (netcdf-c 4.10.1 through netCDF4-python, zarr-python's consolidate_metadata), not from our writer."""
from __future__ import annotations

import binascii
import json
from pathlib import Path

import numpy as np
import pytest

from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.checker import check
from nczarr_conformance.cli.convert import main as nc2nczarr
from nczarr_conformance.errors import UsageError
from nczarr_conformance.model import Attribute, Dataset, Dimension, Group, Variable
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.peers import netcdf4
from nczarr_conformance.stores import DirectoryStore
from nczarr_conformance.stores.memory import MemoryStore
from nczarr_conformance.urls import to_file_url
from tests.conftest import require_module


def _nested() -> Dataset:
    """Variables at three depths, using dimensions of their own group and of ancestors, and a scalar."""
    root = Group({"x": Dimension(3), "t": Dimension(2, True)})
    root.variables["top"] = Variable("int", ["/t", "/x"], (2, 3), {}, np.arange(6, dtype="i4").reshape(2, 3))
    g1 = Group({"y": Dimension(2)})
    g1.variables["w"] = Variable("double", ["/x", "/g1/y"], (3, 2), {}, np.arange(6.0).reshape(3, 2))
    g1.variables["s"] = Variable("float", [], (), {}, np.array(1.5, dtype="f4"))
    g2 = Group({"z": Dimension(4)})
    g2.variables["d"] = Variable("short", ["/g1/y", "/g1/g2/z"], (2, 4), {}, np.arange(8, dtype="i2").reshape(2, 4))
    g1.groups["g2"] = g2
    root.groups["g1"] = g1
    return Dataset(root)


def _array_dimensions(path: Path) -> dict[str, object]:
    """Every array's _ARRAY_DIMENSIONS (None where absent), by array path."""
    return {str(z.parent.relative_to(path)): json.loads((z.parent / ".zattrs").read_text()).get("_ARRAY_DIMENSIONS")
            for z in sorted(path.rglob(".zarray"))}


def _ours(tmp_path: Path, name: str, dataset: Dataset, **kwargs) -> Path:
    path = tmp_path / f"{name}.file"
    with DirectoryStore(path, "w") as store:
        write_dataset(dataset, store, **kwargs)
    return path


@pytest.mark.peer
@pytest.mark.parametrize("flavor,mode", [("nczarr-4.10", "nczarr"), ("zarr", "zarr")])
def test_array_dimensions_in_every_group_as_netcdf_c_writes_them(tmp_path, flavor, mode):
    require_module("netCDF4")
    theirs = tmp_path / f"c-{mode}.file"
    netcdf4.write(_nested(), to_file_url(str(theirs), "file", mode))
    expected = _array_dimensions(theirs)
    assert expected["g1/g2/d"] == ["y", "z"] and expected["g1/w"] == ["x", "y"]  # netcdf-c: every group
    ours = _array_dimensions(_ours(tmp_path, flavor, _nested(), flavor=flavor))
    if flavor == "zarr":  # netcdf-c stores a pure-Zarr scalar as shape [1] ("_scalar_"), we as zarr-python: []
        assert (expected.pop("g1/s"), ours.pop("g1/s")) == (["_scalar_"], [])
    assert ours == expected
    # noxarray: netcdf-c writes none, nor do we
    off = tmp_path / f"c-{mode}-off.file"
    netcdf4.write(_nested(), to_file_url(str(off), "file", f"{mode},noxarray"))
    assert set(_array_dimensions(off).values()) == {None}
    assert _array_dimensions(_ours(tmp_path, f"{flavor}-off", _nested(), flavor=flavor, xarray=False)) == \
        _array_dimensions(off)


def test_xarray_opens_every_group_of_our_default_output(tmp_path):
    xr = require_module("xarray")
    import warnings

    path = _ours(tmp_path, "ours", _nested())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # consolidated and complete: xarray says nothing
        tree = xr.open_datatree(str(path), engine="zarr", zarr_format=2, consolidated=True, decode_cf=False)
        sub = xr.open_zarr(str(path), group="g1/g2", consolidated=True, zarr_format=2, decode_cf=False)
    assert tree["g1/g2/d"].dims == ("y", "z") and tree["g1/s"].dims == ("_scalar_",)
    assert sub["d"].values.tolist() == np.arange(8).reshape(2, 4).tolist()


class RecordingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.order: list[str] = []

    def _put(self, key: str, data: bytes) -> None:
        self.order.append(key)
        super()._put(key, data)


@pytest.mark.parametrize("flavor", ["nczarr-4.10", "zarr"])
def test_chunks_go_before_metadata_and_the_root_last(flavor):
    """nczarr/writer.py: every chunk is put before any metadata object, the root's metadata after every other
    metadata object and .zmetadata last, so a reader never sees metadata naming chunks not there yet."""
    store = RecordingStore()
    write_dataset(_nested(), store, flavor=flavor, consolidate=True)
    meta = [i for i, key in enumerate(store.order) if key.rsplit("/", 1)[-1].startswith(".z")]
    chunks = [i for i, key in enumerate(store.order) if not key.rsplit("/", 1)[-1].startswith(".z")]
    assert chunks and meta and max(chunks) < min(meta), store.order
    root = [i for i, key in enumerate(store.order) if key in ("/.zgroup", "/.zattrs")]
    nested = [i for i in meta if store.order[i] not in ("/.zgroup", "/.zattrs", "/.zmetadata")]
    assert max(nested) < min(root) and store.order[-1] == "/.zmetadata", store.order


@pytest.mark.parametrize("flavor", ["nczarr-4.10", "nczarr-2-upper", "zarr"])
def test_zmetadata_is_written_last_and_equals_zarr_pythons_consolidation(tmp_path, flavor):
    zarr = require_module("zarr")
    dataset = _nested()
    if flavor == "nczarr-2-upper":  # 4.9.0's layout has no unlimited dimensions nor scalars
        dataset.root.dimensions["t"].unlimited = False
        del dataset.root.groups["g1"].variables["s"]
    store = RecordingStore()
    write_dataset(dataset, store, flavor=flavor)
    assert store.order[-1] == "/.zmetadata" and store.order.count("/.zmetadata") == 1
    ours = json.loads(store.objects["/.zmetadata"])
    # zarr-python's consolidate_metadata over the same objects (without ours) is the expected document
    path, copy = tmp_path / "ours.file", tmp_path / "z.file"  # zarr-python rewrites a .zgroup it consolidates
    for key, data in store.objects.items():
        for where in (path, copy):
            (where / key.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            (where / key.lstrip("/")).write_bytes(data)
    (copy / ".zmetadata").unlink()
    zarr.consolidate_metadata(str(copy), zarr_format=2)
    theirs = json.loads((copy / ".zmetadata").read_text())
    # the same document shape and entries; each entry is the object as stored (zarr-python re-serialises
    # what it parsed, dropping keys it does not know such as _NCZARR_GROUP: that would not be exact)
    assert (sorted(ours), ours["zarr_consolidated_format"]) == (sorted(theirs), theirs["zarr_consolidated_format"])
    assert sorted(ours["metadata"]) == sorted(theirs["metadata"])
    assert all(doc == json.loads(store.objects["/" + key]) for key, doc in ours["metadata"].items())
    assert [f.rule for f in check(str(path)).findings if f.rule == "NCZ-CONSOLIDATED-MATCH"] == []
    group = zarr.open_group(str(path), mode="r", zarr_format=2, use_consolidated=True)  # ours, not theirs
    assert sorted(name for name, _ in group.arrays()) == sorted(dataset.root.variables)



def test_a_contiguous_variable_is_chunked_in_whole_rows_up_to_4_mib():
    """A variable without chunks (netCDF's contiguous) gets writer.auto_chunks' chunks: "the whole shape, split along
    leading dims to ≤ 4 MiB", so (1000, 1000) doubles (8000-byte rows) keep their rows whole, 4 MiB // 8000 = 524
    of them a chunk, rather than being cut along the trailing dimension too."""
    root = Group({"y": Dimension(1000), "x": Dimension(1000)})
    root.variables["v"] = Variable("double", ["/y", "/x"], (1000, 1000), {}, np.zeros((1000, 1000)))
    store = MemoryStore()
    write_dataset(Dataset(root), store)
    assert json.loads(store.objects["/v/.zarray"])["chunks"] == [4 * 1024**2 // 8000, 1000] == [524, 1000]

def test_zmetadata_is_laid_out_as_zarr_python_2_writes_it():
    """nczarr/consolidated.py writes .zmetadata "as zarr-python's consolidate_metadata writes it": zarr-python 2's
    ``zarr.util.json_dumps`` lays it out with ``indent=4`` and ``separators=(',', ': ')`` (it also sorts keys and
    escapes non-ASCII, which we do not: attribute order and UTF-8 are kept on purpose). zarr-python 3.1 writes one
    line, so the layout is the 2.x one, byte for byte apart from those two."""
    store = RecordingStore()
    write_dataset(_nested(), store, consolidate=True)
    raw = store.objects["/.zmetadata"]
    assert raw == json.dumps(json.loads(raw), indent=4, separators=(",", ": "), ensure_ascii=False).encode("utf-8")


@pytest.mark.peer
@pytest.mark.parametrize("flavor", ["nczarr-4.10", "zarr"])
def test_zmetadata_keeps_attribute_creation_order(tmp_path, flavor):
    """Our reader takes metadata from .zmetadata; each entry must keep its object's key order, so that
    attributes come out in creation order (ncdump's), as netCDF4-python lists them from the source file."""
    nc4 = require_module("netCDF4")
    src = tmp_path / "order.nc"
    with nc4.Dataset(src, "w") as ds:
        ds.createDimension("x", 2)
        v = ds.createVariable("v", "i4", ("x",))
        for name in ("zeta", "alpha", "mid", "beta"):
            ds.setncattr(name, name)
            v.setncattr(name, 1)
    with nc4.Dataset(src) as ds:
        expected = {"/": ds.ncattrs(), "/v": ds["v"].ncattrs()}
    out = tmp_path / "order.file"
    assert nc2nczarr(["--quiet", "--flavor", flavor, str(src), str(out)]) == 0
    meta = json.loads((out / ".zmetadata").read_text())["metadata"]
    for key, doc in meta.items():  # every entry in its object's own order
        assert list(doc) == list(json.loads((out / key).read_text())), key
    got = open_dataset(str(out), data=False)
    assert {"/": list(got.root.attributes), "/v": list(got.root.variables["v"].attributes)} == expected


def test_consolidate_keyword_and_the_char_exception():
    dataset = _nested()
    assert "/.zmetadata" not in _written(dataset, consolidate=False)
    dataset.root.variables["c"] = Variable("char", ["/x"], (3,), {}, np.array([b"a", b"b", b"c"]))
    assert "/.zmetadata" not in _written(dataset)  # >S1: zarr-python would refuse the group through it
    assert "/.zmetadata" in _written(dataset, consolidate=True)
    assert "/.zmetadata" in _written(dataset, char_as="S1")
    assert "/.zmetadata" in _written(dataset, flavor="zarr")
    with pytest.raises(UsageError, match="takes no char_as"):
        _written(dataset, flavor="nczarr-2-upper", char_as="S1")


@pytest.mark.peer
def test_a_text_string_fill_leaves_zmetadata_out_so_zarr_python_reads_the_rest(tmp_path):
    """netcdf-c writes a string fill_value as text; zarr-python 3 takes a bytes fill as base64 and, through a
    .zmetadata, refuses the whole group over it (found by the S3 property once .zmetadata became the default)."""
    zarr = require_module("zarr")
    root = Group({"x": Dimension(2)})
    root.variables["n"] = Variable("int", ["/x"], (2,), {}, np.array([1, 2], dtype="i4"))
    root.variables["s"] = Variable("string", ["/x"], (2,), {"_FillValue": Attribute("string", np.array(["N/A"],
                                   dtype=object))}, np.array(["a", "N/A"], dtype=object))
    forced = _ours(tmp_path, "forced", Dataset(root), consolidate=True)
    with pytest.raises(binascii.Error, match="Incorrect padding"):  # "N/A" taken for base64
        zarr.open_group(str(forced), mode="r", zarr_format=2, use_consolidated=True)
    default = _ours(tmp_path, "default", Dataset(root))
    assert not (default / ".zmetadata").exists()
    group = zarr.open_group(str(default), mode="r", zarr_format=2)
    assert group["n"][:].tolist() == [1, 2]
    nc4 = require_module("netCDF4")
    with nc4.Dataset(to_file_url(str(default), "file")) as nc:  # netcdf-c takes the text fill as it is
        assert (nc["s"]._FillValue, nc["s"][:].tolist()) == ("N/A", ["a", "N/A"])


def _written(dataset: Dataset, **kwargs) -> dict[str, bytes]:
    store = MemoryStore()
    write_dataset(dataset, store, **kwargs)
    return store.objects


def _chars() -> Dataset:
    root = Group({"x": Dimension(4)})
    root.variables["c"] = Variable("char", ["/x"], (4,), {}, np.array([b"a", b"b", b"", b"d"], dtype="S1"))
    return Dataset(root)


@pytest.mark.peer
def test_pure_zarr_char_is_zarr_pythons_dtype_and_netcdf_c_reads_strings(tmp_path):
    """--flavor zarr writes char as zarr-python does (|S1, base64 fill); the trade-off: netcdf-c 4.10.1
    then reads a string variable, one string per char (NUL -> "")."""
    zarr = require_module("zarr")
    require_module("netCDF4")
    theirs = zarr.open_group(str(tmp_path / "z.file"), mode="w", zarr_format=2)
    theirs.create_array("c", shape=(4,), dtype="S1", fill_value=b"\x00", compressors=None)
    expected = json.loads((tmp_path / "z.file" / "c" / ".zarray").read_text())
    path = _ours(tmp_path, "ours", _chars(), flavor="zarr")
    zarray = json.loads((path / "c" / ".zarray").read_text())
    assert (zarray["dtype"], zarray["fill_value"]) == (expected["dtype"], expected["fill_value"])
    seen = zarr.open_group(str(path), mode="r", zarr_format=2)["c"][...]
    assert (seen.dtype, seen.tolist()) == (np.dtype("S1"), [b"a", b"b", b"", b"d"])
    ours = open_dataset(str(path)).root.variables["c"]  # pure Zarr |S1 is numpy's char: as zarr-python sees it
    assert (ours.type, np.asarray(ours.data).tolist()) == ("char", seen.tolist())
    import netCDF4

    with netCDF4.Dataset(to_file_url(str(path), "file", "zarr")) as nc:
        var = nc["c"]
        assert (var.dtype, var[:].tolist()) == (str, ["a", "b", "", "d"])


@pytest.mark.peer
def test_nczarr_char_as_s1_is_what_zarr_python_reads_and_netcdf_c_reads_as_strings(tmp_path):
    zarr = require_module("zarr")
    require_module("netCDF4")
    import netCDF4

    default = _ours(tmp_path, "gt", _chars())
    assert json.loads((default / "c" / ".zarray").read_text())["dtype"] == ">S1"
    with netCDF4.Dataset(to_file_url(str(default), "file")) as nc:  # Appendix E char: netcdf-c's char
        assert (nc["c"].dtype, nc["c"][:].filled(b"").tolist()) == (np.dtype("S1"), [b"a", b"b", b"", b"d"])
    path = _ours(tmp_path, "s1", _chars(), char_as="S1")
    assert json.loads((path / "c" / ".zarray").read_text())["dtype"] == "|S1"
    assert [f.rule for f in check(str(path), deep=True).findings if f.severity.value == "error"] == []
    assert zarr.open_group(str(path), mode="r", zarr_format=2)["c"][...].tolist() == [b"a", b"b", b"", b"d"]
    with netCDF4.Dataset(to_file_url(str(path), "file")) as nc:
        assert (nc["c"].dtype, nc["c"][:].tolist()) == (str, ["a", "b", "", "d"])
    # |S1 alone is Appendix E's string in NCZarr (netcdf-c's reading, above, which ignores the marker); ours marks
    # it char (_nczarr_array.nczarr_type), so our reader reads the char netCDF4-python wrote
    assert json.loads((path / "c" / ".zattrs").read_text())["_nczarr_array"]["nczarr_type"] == "char"
    ours = open_dataset(str(path)).root.variables["c"]
    assert (ours.type, np.asarray(ours.data).tolist()) == ("char", [b"a", b"b", b"", b"d"])


def test_cli_consolidate_and_char_as(rich_nc, tmp_path, capsys):
    assert nc2nczarr(["-q", str(rich_nc), str(tmp_path / "a.file")]) == 0
    assert not (tmp_path / "a.file" / ".zmetadata").exists()  # rich.nc has a char variable (>S1)
    assert nc2nczarr(["-q", "--char-as=S1", str(rich_nc), str(tmp_path / "b.file")]) == 0
    assert (tmp_path / "b.file" / ".zmetadata").is_file()
    chars = [z for z in (tmp_path / "b.file").rglob(".zarray") if json.loads(z.read_text())["dtype"] == "|S1"]
    assert chars
    assert nc2nczarr(["-q", "--char-as=S1", "--no-consolidate", str(rich_nc), str(tmp_path / "c.file")]) == 0
    assert not (tmp_path / "c.file" / ".zmetadata").exists()
    assert nc2nczarr(["-q", "--consolidate", str(rich_nc), str(tmp_path / "d.file")]) == 0
    assert (tmp_path / "d.file" / ".zmetadata").is_file()
    with pytest.raises(SystemExit) as exc:
        nc2nczarr(["--consolidate", "--no-consolidate", str(rich_nc), str(tmp_path / "e.file")])
    assert exc.value.code == 2 and not (tmp_path / "e.file").exists()
    before = sorted(p.name for p in (tmp_path / "b.file").rglob("*"))
    for flag in ("--char-as=S1", "--no-consolidate"):  # an append keeps the store's layout
        with pytest.raises(SystemExit) as exc:
            nc2nczarr(["--append", "time", flag, str(rich_nc), str(tmp_path / "b.file")])
        assert exc.value.code == 2
    assert sorted(p.name for p in (tmp_path / "b.file").rglob("*")) == before
    assert "keeps the store's layout" in capsys.readouterr().err


def test_a_variable_of_one_chunk_is_written_without_a_thread_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool per variable cost a file of 2,000 one-chunk variables (netcdf-c's ref_hdf5_compat1.nc) 2,000 pools
    and their threads, with nothing to overlap; a variable of several chunks still gets one. The values written
    either way are the model's."""
    from nczarr_conformance.nczarr import writer

    pools: list[int] = []
    real = writer.ThreadPoolExecutor

    def counted(threads: int) -> object:
        pools.append(threads)
        return real(threads)

    monkeypatch.setattr(writer, "ThreadPoolExecutor", counted)
    root = Group(dimensions={"x": Dimension(4)})
    for name in ("a", "b", "c"):
        root.variables[name] = Variable("int", ["/x"], (4,), {}, np.arange(4, dtype="i4"), chunks=(4,))
    store = MemoryStore()
    write_dataset(Dataset(root), store, threads=2)
    assert pools == []
    root.variables["d"] = Variable("int", ["/x"], (4,), {}, np.arange(4, dtype="i4") * 2, chunks=(1,))
    store = MemoryStore()
    write_dataset(Dataset(root), store, threads=2)
    assert pools == [2]
    from nczarr_conformance.nczarr.reader import read_dataset

    written = read_dataset(store).root.variables
    assert [np.asarray(written[n].data).tolist() for n in "abcd"] == [[0, 1, 2, 3]] * 3 + [[0, 2, 4, 6]]
