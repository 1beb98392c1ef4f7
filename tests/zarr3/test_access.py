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
    kind = run("-k", str(rich), module="dump")
    assert kind.returncode == 0 and kind.stdout == "zarr zarr-v3\n", kind


def test_check_reports_flavor_and_netcdf_c_finding(rich):
    result = run("--format", "json", str(rich), module="check")
    report = json.loads(result.stdout)
    jsonschema.validate(report, REPORT_SCHEMA)  # the report contract (docs/contracts/check-report.md)
    assert report["flavor"] == "zarr-v3"
    assert [f["rule"] for f in report["findings"]] == ["NCZ-V3-INTEROP-NETCDFC"]
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
