"""Model → our writer → our reader is identity, for each flavor and every local store."""
from __future__ import annotations

import numpy as np
import pytest

from nczarr_conformance.errors import UnsupportedError
from nczarr_conformance.model import Dataset, Dimension, Group, Variable, diff
from nczarr_conformance.nczarr.reader import read_dataset
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.stores import DirectoryStore, MemoryStore, ZipStore
from nczarr_conformance.testing.ignores import CONTIGUOUS, UPPER_FLAVOR


def write_then_read(model: Dataset, kind: str, tmp_path, flavor: str = "nczarr-4.10") -> Dataset:
    if kind == "memory":
        store = MemoryStore()
        write_dataset(model, store, flavor=flavor)
        return read_dataset(store)
    target = tmp_path / ("ds.zip" if kind == "zip" else "ds.file")
    cls = ZipStore if kind == "zip" else DirectoryStore
    with cls(target, "w") as store:
        write_dataset(model, store, flavor=flavor)
    with cls(target, "r") as store:
        return read_dataset(store)


@pytest.mark.smoke  # the smoke run's case for this store kind (docs/testing.md)
@pytest.mark.parametrize("kind", ["memory", "file", "zip"])
def test_identity(small, kind, tmp_path):
    assert diff(small, write_then_read(small, kind, tmp_path), ignore=CONTIGUOUS) == []


def test_upper_flavor_identity_without_strings_scalars_and_unlimited(small, tmp_path):
    del small.root.variables["s"]
    del small.root.variables["sc"]
    small.root.dimensions["t"].unlimited = False
    back = write_then_read(small, "file", tmp_path, "nczarr-2-upper")
    assert diff(small, back, ignore={**CONTIGUOUS, **UPPER_FLAVOR}) == []


@pytest.mark.parametrize("what", ["s", "t", "sc"])
def test_upper_flavor_refuses_what_netcdf_c_490_cannot_read(small, what, tmp_path):
    if what != "t":
        small.root.dimensions["t"].unlimited = False
    for name in {"s", "sc"} - {what}:
        del small.root.variables[name]
    with pytest.raises(UnsupportedError):
        write_dataset(small, MemoryStore(), flavor="nczarr-2-upper")


def test_dir_and_zip_hold_identical_objects(small, tmp_path):
    with DirectoryStore(tmp_path / "a.file", "w") as d:
        write_dataset(small, d)
    with ZipStore(tmp_path / "a.zip", "w") as z:
        write_dataset(small, z)
    d, z = DirectoryStore(tmp_path / "a.file"), ZipStore(tmp_path / "a.zip")
    assert d.list_prefix("/") == z.list_prefix("/")
    for key in d.list_prefix("/"):
        assert d.get(key) == z.get(key), key


def test_chunks_not_dividing_shape_and_all_fill_chunks_skipped():
    root = Group({"x": Dimension(7), "y": Dimension(5)})
    data = np.full((7, 5), -1, dtype="i4")
    data[:3, :2] = 1
    root.variables["v"] = Variable("int", ["/x", "/y"], (7, 5), {}, data, chunks=[3, 2])
    from nczarr_conformance.model import Attribute

    root.variables["v"].attributes["_FillValue"] = Attribute("int", np.array([-1]))
    model = Dataset(root)
    store = MemoryStore()
    write_dataset(model, store)
    assert [k for k in store.objects if not k.rsplit("/", 1)[-1].startswith(".")] == ["/v/0.0"]
    assert diff(model, read_dataset(store)) == []


def test_edge_values_of_every_numeric_type():
    root = Group({"n": Dimension(4)})
    for code, nctype in [("i1", "byte"), ("u1", "ubyte"), ("i2", "short"), ("u2", "ushort"), ("i4", "int"),
                         ("u4", "uint"), ("i8", "int64"), ("u8", "uint64")]:
        info = np.iinfo(code)
        root.variables[nctype] = Variable(nctype, ["/n"], (4,), {}, np.array([info.min, info.max, 0, 1], code))
    for code, nctype in [("f4", "float"), ("f8", "double")]:
        tiny = np.finfo(code).smallest_subnormal
        root.variables[nctype] = Variable(nctype, ["/n"], (4,), {}, np.array([np.nan, -np.inf, -0.0, tiny], code))
    model = Dataset(root)
    store = MemoryStore()
    write_dataset(model, store)
    assert diff(model, read_dataset(store), ignore=CONTIGUOUS) == []


def test_big_endian_and_compression_are_kept(tmp_path):
    root = Group({"x": Dimension(100)})
    root.variables["f"] = Variable("float", ["/x"], (100,), {}, np.linspace(0, 1, 100, dtype=">f4"), chunks=[30],
                                   endianness="big",
                                   filters=[{"id": "shuffle", "elementsize": 4}, {"id": "zlib", "level": 3}])
    store = MemoryStore()
    write_dataset(Dataset(root), store)
    import json

    zarray = json.loads(store.objects["/f/.zarray"])
    assert zarray["dtype"] == ">f4"
    assert zarray["compressor"] == {"id": "zlib", "level": 3}
    assert zarray["filters"] == [{"id": "shuffle", "elementsize": 4}]
    back = read_dataset(store)
    assert back.root.variables["f"].endianness == "big"
    assert diff(Dataset(root), back) == []


def test_declared_giant_shape_is_an_error_not_an_allocation():
    import json

    from nczarr_conformance.errors import FormatError

    store = MemoryStore()
    root = Group({"x": Dimension(2)})
    root.variables["v"] = Variable("double", ["/x"], (2,), {}, np.zeros(2))
    write_dataset(Dataset(root), store, consolidate=False)  # the edits below change the objects themselves
    zarray = json.loads(store.objects["/v/.zarray"])
    zarray["shape"] = [10**12]
    store.objects["/v/.zarray"] = json.dumps(zarray).encode()
    attrs = json.loads(store.objects["/.zattrs"])
    attrs["_nczarr_group"]["dimensions"]["x"] = 10**12
    store.objects["/.zattrs"] = json.dumps(attrs).encode()
    model = read_dataset(store, data=False)
    assert model.root.variables["v"].shape == (10**12,)
    with pytest.raises(FormatError, match="refusing"):
        read_dataset(store)


def _v1_store() -> MemoryStore:
    """An NCZarr v1 dataset (2020: separate .nczarr/.nczgroup/.nczarray/.nczattr objects)."""
    import json

    objs = {
        "/.nczarr": {"nczarr_version": "1.0.0"},
        "/.zgroup": {"zarr_format": 2},
        "/.nczgroup": {"dims": {"x": "3", "y": 2}, "vars": ["v"], "groups": ["g"]},
        "/.zattrs": {"title": "v1", "n": [1, 2]},
        "/.nczattr": {"types": {"title": "<U1", "n": "<i2"}},
        "/v/.zarray": {"zarr_format": 2, "shape": [3, 2], "dtype": "<i4", "chunks": [2, 2], "fill_value": -1,
                       "order": "C", "compressor": None, "filters": None},
        "/v/.nczarray": {"dimrefs": ["/x", "/y"], "storage": "chunked"},
        "/g/.zgroup": {"zarr_format": 2},
        "/g/.nczgroup": {"dims": {}, "vars": ["s"], "groups": []},
        "/g/s/.zarray": {"zarr_format": 2, "shape": [1], "dtype": "<f8", "chunks": [1], "fill_value": 0,
                         "order": "C", "compressor": None, "filters": None},
        "/g/s/.nczvar": {"dimrefs": [], "storage": "scalar"},
    }
    store = MemoryStore({k: json.dumps(v).encode() for k, v in objs.items()})
    store.objects["/v/0.0"] = np.array([[0, 1], [2, 3]], "<i4").tobytes()
    store.objects["/g/s/0"] = np.array([6.5], "<f8").tobytes()
    return store


def test_reads_nczarr_v1():
    from nczarr_conformance.nczarr.flavors import MetadataSource, detect

    store = _v1_store()
    assert detect(MetadataSource(store))[0] == "nczarr-v1"
    model = read_dataset(store)
    assert model.root.dimensions == {"x": Dimension(3), "y": Dimension(2)}
    assert model.root.attributes["n"].type == "short"
    assert model.root.attributes["title"].value == "v1"
    assert model.root.variables["v"].data.tolist() == [[0, 1], [2, 3], [-1, -1]]  # the stored fill_value
    scalar = model.root.groups["g"].variables["s"]
    assert scalar.shape == () and float(scalar.data) == 6.5


def test_the_model_never_shows_storage_bookkeeping_attributes(tmp_path):
    """model.is_internal_attribute: the NCZarr keys a store holds in its .zattrs (_nczarr_*, _NCZARR_*,
    _ARRAY_DIMENSIONS) are never attributes of the model our reader gives."""
    import json

    from nczarr_conformance.access.dataset import open_dataset
    from nczarr_conformance.conversion.from_netcdf import convert
    from nczarr_conformance.model import is_internal_attribute
    from nczarr_conformance.testing.samples import write_rich_nc

    src = tmp_path / "rich.nc"
    write_rich_nc(str(src))
    convert(str(src), str(tmp_path / "r.file"))
    stored = {name for z in (tmp_path / "r.file").rglob(".zattrs") for name in json.loads(z.read_text())}
    # nczarr.md's bookkeeping keys and xarray's dimension names, named here, not taken from the code under test
    bookkeeping = {name for name in stored if name.lower().startswith("_nczarr") or name == "_ARRAY_DIMENSIONS"}
    assert {"_nczarr_group", "_nczarr_array", "_nczarr_attr", "_nczarr_superblock", "_ARRAY_DIMENSIONS"} <= bookkeeping
    shown = {name for _, group in open_dataset(str(tmp_path / "r.file")).root.walk()
             for obj in [group, *group.variables.values()] for name in obj.attributes}
    assert shown and not shown & bookkeeping
    assert all(is_internal_attribute(name) for name in bookkeeping)
