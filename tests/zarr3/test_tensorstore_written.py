"""Zarr v3 arrays written by TensorStore's ``zarr3`` driver read equal to TensorStore's own reading.

TensorStore is a second, independent v3 writer (C++, not zarr-python): its chunk keys, codec
configurations (``zstd`` with ``checksum``, shard indexes at the start), ``fill_value`` forms and
transposed layouts are its own. Expected values come from TensorStore reading back what it wrote;
our reader (``open_dataset``) must give the same values, shape, dimension names and fill, and the
model's storage (inner chunk shape, byte order, codec names) must say what the metadata TensorStore
wrote says. TensorStore writes arrays only: the root ``zarr.json`` is written by hand (as any group
writer would), an array below ``g/`` sits in an implicit group.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.model import Dataset, Group, Variable
from tests.zarr3.conftest import NUMERIC

ts = pytest.importorskip("tensorstore")

#: bytes→bytes codecs TensorStore 0.1.x writes in a v3 chain (its zarr3 driver's registry)
COMPRESSORS: dict[str, list[dict[str, Any]]] = {
    "none": [],
    "gzip": [{"name": "gzip", "configuration": {"level": 5}}],
    "zstd": [{"name": "zstd", "configuration": {"level": 3}}],
    "blosc": [{"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle",
                                                  "typesize": 4, "blocksize": 0}}],
    "crc32c": [{"name": "crc32c"}],
    "gzip+crc32c": [{"name": "gzip", "configuration": {"level": 1}}, {"name": "crc32c"}],
}
KEY_ENCODINGS = [
    {"name": "default"},
    {"name": "default", "configuration": {"separator": "."}},
    {"name": "v2", "configuration": {"separator": "."}},
    {"name": "v2", "configuration": {"separator": "/"}},
]


def _write_root(root: Path, attributes: dict[str, Any]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group", "attributes": attributes}))


def _ts_array(root: Path, path: str, metadata: dict[str, Any]) -> Any:
    return ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(root)}, "path": path,
                    "metadata": metadata, "create": True}).result()


def _ts_read(root: Path, path: str) -> tuple[np.ndarray, dict[str, Any]]:
    """TensorStore's own reading of an array it wrote: values, and the metadata it stored."""
    array = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(root)}, "path": path},
                    read=True).result()
    return np.asarray(array.read().result()), json.loads((root / path / "zarr.json").read_text())


def _variable(ds: Dataset, path: str) -> Variable:
    *parents, name = path.split("/")
    group: Group = ds.root
    for part in parents:
        group = group.groups[part]
    return group.variables[name]


def _codec_names(chain: list[dict[str, Any]]) -> list[str]:
    return [c["name"] for c in chain if c["name"] != "bytes"]


@st.composite
def ts_arrays(draw: st.DrawFn) -> dict[str, Any]:
    """One array as TensorStore would be asked to write it: type, byte order, shape, chunks, codecs,
    key encoding, optional transpose and sharding, a fill value and a written sub-box."""
    data_type = draw(st.sampled_from(sorted(NUMERIC)))
    itemsize = np.dtype(data_type).itemsize
    ndim = draw(st.integers(1, 3))
    shape = draw(st.lists(st.integers(1, 9), min_size=ndim, max_size=ndim))
    chunks = [draw(st.integers(1, n + 1)) for n in shape]
    endian = draw(st.sampled_from(["little", "big"]))
    serializer: dict[str, Any] = {"name": "bytes"}
    if itemsize > 1:
        serializer["configuration"] = {"endian": endian}
    inner = [serializer, *COMPRESSORS[draw(st.sampled_from(sorted(COMPRESSORS)))]]
    codecs: list[dict[str, Any]] = []
    order = list(range(ndim))
    if ndim > 1 and draw(st.booleans()):
        order = draw(st.permutations(range(ndim)))
        codecs.append({"name": "transpose", "configuration": {"order": order}})
    grid = chunks
    sharded = draw(st.booleans())
    if sharded:
        per_shard = [draw(st.integers(1, 3)) for _ in range(ndim)]
        grid = [c * p for c, p in zip(chunks, per_shard, strict=True)]
        index_codecs = [{"name": "bytes", "configuration": {"endian": draw(st.sampled_from(["little", "big"]))}},
                        *draw(st.sampled_from([[], [{"name": "crc32c"}]]))]
        codecs.append({"name": "sharding_indexed", "configuration": {
            "chunk_shape": [chunks[o] for o in order],  # in the transposed axis order
            "codecs": inner, "index_codecs": index_codecs,
            "index_location": draw(st.sampled_from(["start", "end"]))}})
    else:
        codecs.extend(inner)
    if data_type.startswith("float"):
        fill: Any = draw(st.sampled_from(["NaN", "Infinity", "-Infinity", 0.0, -1.5, 9.96921e36]))
    else:
        info = np.iinfo(data_type)
        fill = draw(st.integers(int(info.min), int(info.max)))
    names = [draw(st.sampled_from([f"d{d}_{shape[d]}", None])) for d in range(ndim)]
    box = tuple(slice(draw(st.integers(0, n - 1)), None) for n in shape)
    return {"path": draw(st.sampled_from(["v", "g/v"])),
            "metadata": {"shape": shape, "data_type": data_type, "fill_value": fill, "codecs": codecs,
                         "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": grid}},
                         "chunk_key_encoding": draw(st.sampled_from(KEY_ENCODINGS)),
                         "dimension_names": names, "attributes": {"units": "m", "scale": 0.5}},
            "box": box, "seed": draw(st.integers(0, 2**32 - 1)), "endian": endian, "read_unit": chunks}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=ts_arrays())
def test_tensorstore_written_arrays_read_equal(case: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.mktemp("ts") / "store.zarr"
    _write_root(root, {"title": "written by TensorStore"})
    meta = case["metadata"]
    array = _ts_array(root, case["path"], meta)
    dtype = np.dtype(meta["data_type"])
    region = np.zeros(meta["shape"], dtype)[case["box"]].shape
    values = np.random.default_rng(case["seed"]).integers(0, 100, size=region).astype(dtype)
    array[case["box"]].write(values).result()

    want, stored = _ts_read(root, case["path"])
    ours = open_dataset(str(root))
    var = _variable(ours, case["path"])

    assert var.type == NUMERIC[meta["data_type"]]
    assert tuple(var.shape) == tuple(meta["shape"])
    np.testing.assert_array_equal(np.asarray(var.data), want)
    for dim, name, size in zip(var.dimensions, meta["dimension_names"], meta["shape"], strict=True):
        assert dim.rsplit("/", 1)[-1] == (name if name is not None else f"_Anonymous_Dim_{size}")
    assert {n: (a.type, a.value if isinstance(a.value, str) else a.value.tolist())
            for n, a in var.attributes.items()} == {"units": ("char", "m"), "scale": ("double", [0.5])}
    assert ours.root.attributes["title"].value == "written by TensorStore"
    # storage: the read unit, byte order and codecs are those TensorStore stored
    chain = stored["codecs"]
    inner_chain = chain[-1]["configuration"]["codecs"] if chain[-1]["name"] == "sharding_indexed" else chain
    assert var.chunks == case["read_unit"]  # the (inner) chunk in the array's own axis order
    if dtype.itemsize > 1:
        bytes_codec = next(c for c in inner_chain if c["name"] == "bytes")
        assert var.endianness == bytes_codec["configuration"]["endian"] == case["endian"]
    assert [f["id"] for f in var.filters] == _codec_names(chain)
    # the corner never written reads as the fill TensorStore declared, in both readings
    untouched = tuple(slice(0, b.start) for b in case["box"])
    fill = meta["fill_value"]
    if isinstance(fill, str):
        fill = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[fill]
    for reading in (want, np.asarray(var.data)):
        corner = reading[untouched]
        np.testing.assert_array_equal(corner, np.full(corner.shape, fill, dtype))


def test_a_tensorstore_array_at_the_store_root_is_refused_in_one_line(tmp_path: Path) -> None:
    """TensorStore writes an array where it is told; at the store's root there is no group, so
    netCDF has no dataset: refused naming the key (zarr-python's ``open_group`` refuses it too)."""
    import subprocess
    import sys

    root = tmp_path / "bare.zarr"
    _ts_array(root, "", {"shape": [3], "data_type": "int32", "fill_value": 0,
                         "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [3]}},
                         "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]})
    zarr = pytest.importorskip("zarr")
    with pytest.raises(zarr.errors.ContainsArrayError, match="An array already exists"):
        zarr.open_group(str(root), mode="r")
    run = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.dump", "-h", str(root)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run
    assert run.stderr.count("\n") == 1 and "/zarr.json" in run.stderr and "group" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""


@pytest.mark.parametrize("flavor", ["zarr", "nz", "nczarr-v3-draft"])
def test_tensorstore_reads_our_numeric_arrays_in_every_v3_flavor(tmp_path: Path, flavor: str) -> None:
    """Our v3 output, each flavor, through TensorStore's zarr3 driver: every numeric variable of the bundled
    sample equals netCDF4-python's reading of the source (TensorStore has no text types; the draft's char is
    uint8 and its strings raw bits, which TensorStore's registry lacks, so those are left to other readers)."""
    import subprocess
    import sys

    netCDF4 = pytest.importorskip("netCDF4")
    from tests.conftest import REPO

    source = REPO / "corpus" / "rich.nc"
    out = tmp_path / "o.zarr"
    extra: list[str] = []
    if flavor == "nz":  # NZ-1.0 holds neither its char variable nor its float attribute mixing NaN with numbers
        import shutil

        source = Path(shutil.copy(source, tmp_path / "rich-nz.nc"))
        with netCDF4.Dataset(source, "a") as nc:
            nc.delncattr("f32")
            extra = ["-V", ",".join("/" + path for path, var in _netcdf_variables(nc)
                                    if var.dtype == str or np.dtype(var.dtype).kind != "S")]
    done = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", "--quiet", "--zarr-format", "3",
                           "--flavor", flavor, *extra, str(source), str(out)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    compared = 0
    with netCDF4.Dataset(source) as nc:
        nc.set_auto_mask(False)
        for path, var in _netcdf_variables(nc):
            if var.dtype == str or np.dtype(var.dtype).kind not in "iuf":
                continue
            if json.loads((out / path / "zarr.json").read_text())["fill_value"] is None:
                # the draft writes NOFILL as fill_value null, as zformat3.c does (NCZ-V3-DRAFT-FILL says so)
                assert flavor == "nczarr-v3-draft", path
                with pytest.raises(ValueError, match='"fill_value": Expected integer'):
                    _ts_read(out, path)
                continue
            got, _ = _ts_read(out, path)
            np.testing.assert_array_equal(got, np.asarray(var[...]), err_msg=f"{flavor} {path}")
            compared += 1
    assert compared >= 10


def _netcdf_variables(group: Any, prefix: str = "") -> Any:
    for name, var in group.variables.items():
        yield f"{prefix}{name}", var
    for name, sub in group.groups.items():
        yield from _netcdf_variables(sub, f"{prefix}{name}/")
