"""Every way in reads v3: nczarr-dump (CDL, --json, -k), nczarr-check, the lazy open, the xarray engine.

Expected values come from zarr-python (and xarray's own zarr engine), never from our reader.
"""
from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import numpy as np
import pytest

import nczarr_conformance
from nczarr_conformance.model import Dataset
from tests.check.test_check import REPORT_SCHEMA
from tests.check.test_check_cli import run as run_text
from tests.zarr3.conftest import build_rich, expected

zarr = pytest.importorskip("zarr")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def run(*args: str, module: str) -> subprocess.CompletedProcess[str]:
    """The CLI's output as text; the store's non-UTF-8 bytes (a ``bytes`` array) kept as surrogate escapes."""
    if module == "check":
        return run_text(*args, module=module)
    done = subprocess.run([sys.executable, "-m", f"nczarr_conformance.cli.{module}", *args], capture_output=True,
                          check=False, timeout=120)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode("utf-8", "surrogateescape"),
                                       done.stderr.decode("utf-8", "surrogateescape"))


@pytest.fixture(scope="module")
def rich(tmp_path_factory):
    return build_rich(tmp_path_factory.mktemp("v3") / "rich.zarr")


def test_dump_json_values_equal_zarr_python(rich):
    result = run("--json", str(rich), module="dump")
    assert result.returncode == 0, result.stderr
    model = Dataset.from_json(json.loads(result.stdout))
    for where, exp in expected(rich).items():
        if exp[0] != "array" or exp[4].to_json(zarr_format=3) not in ("int16", "float64", "int32", "uint16"):
            continue
        group = model.root
        *parents, name = [p for p in where.split("/") if p]
        for p in parents:
            group = group.groups[p]
        np.testing.assert_array_equal(group.variables[name].data, exp[1], err_msg=where)


def test_dump_cdl_and_kind(rich):
    cdl = run(str(rich), module="dump")
    assert cdl.returncode == 0, cdl.stderr
    assert "netcdf rich {" in cdl.stdout and "group: sub {" in cdl.stdout
    assert "\tint big(y, x) ;" in cdl.stdout
    kind = run("-K", str(rich), module="dump")
    assert kind.returncode == 0 and kind.stdout == "zarr zarr-v3\n", kind


def test_check_reports_flavor_and_netcdf_c_finding(rich):
    result = run("--format", "json", str(rich), module="check")
    report = json.loads(result.stdout)
    jsonschema.validate(report, REPORT_SCHEMA)  # the report contract (docs/contracts/check-report.md)
    assert report["flavor"] == "zarr-v3"
    # the v3 store's only findings are predictions: netcdf-c reads no v3, GDAL 3.6 an older draft, TensorStore no
    # v3 text (the rich sample's char and string arrays)
    assert sorted({f["rule"] for f in report["findings"]}) == ["NCZ-V3-INTEROP-GDAL", "NCZ-V3-INTEROP-NETCDFC",
                                                               "NCZ-V3-INTEROP-TS-TEXT"]
    assert result.returncode == 0, result.stderr


def test_check_deep_reports_a_corrupt_chunk(tmp_path):
    g = zarr.open_group(str(tmp_path / "c.zarr"), mode="w", zarr_format=3)
    g.create_array("v", shape=(4,), chunks=(2,), dtype="int32", dimension_names=["t"])[:] = [1, 2, 3, 4]
    (tmp_path / "c.zarr" / "v" / "c" / "1").write_bytes(b"not zstd")
    report = json.loads(run("--deep", "--format", "json", str(tmp_path / "c.zarr"), module="check").stdout)
    rules = {f["rule"]: f["message"] for f in report["findings"]}
    assert "/v/c/1: chunk does not decode" in rules["NCZ-V3-READ"]


def test_lazy_open_reads_a_slice_of_a_sharded_array(rich):
    theirs = zarr.open_array(str(rich / "sh"), mode="r")
    with nczarr_conformance.open(str(rich)) as ds:
        assert ds.flavor == "zarr-v3"
        np.testing.assert_array_equal(ds["sh"][3:9, 2:7], theirs[3:9, 2:7])
        np.testing.assert_array_equal(ds["sub/deep/z"][...], zarr.open_array(str(rich / "sub/deep/z"))[...])


def test_xarray_engine_equals_xarray_zarr_engine(tmp_path):
    xr = pytest.importorskip("xarray")
    source = xr.Dataset({"temp": (("time", "lat"), np.arange(12, dtype="float64").reshape(4, 3), {"units": "K"})},
                        coords={"time": np.arange(4, dtype="int64")}, attrs={"title": "v3"})
    source.to_zarr(tmp_path / "x.zarr", zarr_format=3, mode="w", encoding={"temp": {"chunks": (2, 3)}})
    ours = xr.open_dataset(tmp_path / "x.zarr", engine="nczarr").load()
    theirs = xr.open_dataset(tmp_path / "x.zarr", engine="zarr", zarr_format=3).load()
    xr.testing.assert_identical(ours, theirs)


#: Zarr v3 blosc's shuffle names (zarr.json) → the number netCDF4-python's ``filters()`` reports for it
V3_BLOSC_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}


def _assert_blosc_encoding_is_the_stores(ds, store, names):
    """Each variable's blosc encoding (compressor, shuffle, level) is what its own ``zarr.json`` says."""
    for name in names:
        [blosc] = [c["configuration"] for c in json.loads((store / name / "zarr.json").read_text())["codecs"]
                   if c["name"] == "blosc"]
        encoding = ds[name].encoding
        assert encoding["blosc"] == {"compressor": f"blosc_{blosc['cname']}",
                                     "shuffle": V3_BLOSC_SHUFFLE[blosc["shuffle"]]}, name
        assert encoding["complevel"] == blosc["clevel"], name


def test_xarray_engine_reads_netcdf_converted_to_v3_with_blosc(tmp_path):
    """corpus/rich.nc's shuffle+deflate variable becomes v3 blosc ("shuffle" by name): the engine reads
    every variable as xarray's netcdf4 engine reads the source, and reports the blosc the store holds."""
    xr = pytest.importorskip("xarray")
    from tests.conftest import CORPUS

    out = tmp_path / "rich3"
    done = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", str(CORPUS / "rich.nc"), str(out),
                           "--zarr-format", "3", "-q"], capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    raw = {"mask_and_scale": False, "decode_times": False}
    ours = xr.open_dataset(out, engine="nczarr", **raw)
    with xr.open_dataset(CORPUS / "rich.nc", engine="netcdf4", **raw) as source:
        assert set(ours.variables) == set(source.variables)
        for name, var in source.variables.items():
            assert ours[name].dtype == var.dtype, name
            np.testing.assert_array_equal(ours[name].values, var.values, err_msg=name)
    blosc = [n for n in ours.variables if "blosc" in (out / n / "zarr.json").read_text()]
    assert blosc, "the store holds a blosc array"
    _assert_blosc_encoding_is_the_stores(ours, out, blosc)
    ours.close()


def test_xarray_engine_reads_zarr_python_blosc_arrays(tmp_path):
    """zarr-python 3's own blosc arrays, every shuffle: values as zarr-python reads them, the encoding the store's."""
    xr = pytest.importorskip("xarray")
    from zarr.codecs import BloscCodec

    store = tmp_path / "b.zarr"
    g = zarr.open_group(str(store), mode="w", zarr_format=3)
    for shuffle in V3_BLOSC_SHUFFLE:
        a = g.create_array(shuffle, shape=(5, 7), chunks=(2, 3), dtype="float32", dimension_names=["y", "x"],
                           compressors=[BloscCodec(cname="zstd", clevel=4, shuffle=shuffle)])
        a[:] = np.arange(35, dtype="float32").reshape(5, 7) / 3
    ours = xr.open_dataset(store, engine="nczarr")
    for shuffle in V3_BLOSC_SHUFFLE:
        theirs = zarr.open_array(str(store / shuffle), mode="r")
        assert ours[shuffle].dtype == theirs.dtype
        np.testing.assert_array_equal(ours[shuffle].values, theirs[...], err_msg=shuffle)
        assert ours[shuffle].encoding["chunksizes"] == theirs.chunks
    _assert_blosc_encoding_is_the_stores(ours, store, V3_BLOSC_SHUFFLE)
    ours.close()


def test_a_request_reads_each_shard_index_once(rich, monkeypatch):
    """[3:9, 2:7] of ``sh`` (inner chunks 2x3, shards 4x6) touches 12 inner chunks in 6 shards: each shard's
    index is read once per request (6 reads, not 12); a second request reads them anew."""
    from nczarr_conformance.zarr3.chain import Sharding

    theirs = zarr.open_array(str(rich / "sh"), mode="r")
    index_reads: list[str] = []
    original = Sharding._read_index

    def read_index(self: Sharding, fetch, shard_key: str):  # type: ignore[no-untyped-def]
        index_reads.append(shard_key)
        return original(self, fetch, shard_key)

    monkeypatch.setattr(Sharding, "_read_index", read_index)
    with nczarr_conformance.open(str(rich)) as ds:
        np.testing.assert_array_equal(ds["sh"][3:9, 2:7], theirs[3:9, 2:7])
        assert sorted(index_reads) == [f"/sh/c/{i}/{j}" for i in range(3) for j in range(2)]
        index_reads.clear()
        np.testing.assert_array_equal(ds["sh"][3:9, 2:7], theirs[3:9, 2:7])
        assert len(index_reads) == 6
