"""Bounds before allocation (issue 20 items 13 and 14), on hostile stores whose ``.zarray`` is written by hand.

Item 13: a lazy selection's budget is computed from the selection's shape arithmetic before
any index array is built, so ``v[:, 0]`` on a (3e8, 2) array is refused with our one line
without first building a 3e8-long index vector (2.4 GB), and at 1e12 rows it is our error,
not numpy's "Unable to allocate 7.28 TiB". The peak RSS is measured in a child process
(its VmHWM before and after the selection), through nczarr_conformance.open and through
the xarray engine.

Item 14: a shape, chunk grid or byte size outside int64 is refused: one line from
nczarr-dump (exit 2), our error type from the engine (never a raw OverflowError), and an
nczarr-check error (NCZ-ARRAY-INT64, exit 1).

Expected values of the selections that fit come from zarr-python reading the same store.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

MiB = 1024**2
INT64_MAX = 2**63 - 1


def hand_made(path: Path, shape: list[int], chunks: list[int], dtype: str = "<f8") -> Path:
    """A pure Zarr v2 group holding one array ``v``, no chunk written, metadata written by hand."""
    (path / "v").mkdir(parents=True)
    (path / ".zgroup").write_text(json.dumps({"zarr_format": 2}))
    (path / "v" / ".zarray").write_text(json.dumps({
        "zarr_format": 2, "shape": shape, "chunks": chunks, "dtype": dtype, "compressor": None, "filters": None,
        "fill_value": 0, "order": "C"}))
    (path / "v" / ".zattrs").write_text(json.dumps({"_ARRAY_DIMENSIONS": [f"d{i}" for i in range(len(shape))]}))
    return path


#: In a child: open the store (lazily, or through xarray), note VmHWM, select, note VmHWM again.
_CHILD = """
import json, sys
def hwm():
    with open('/proc/self/status') as fh:
        return int([l for l in fh if l.startswith('VmHWM')][0].split()[1]) * 1024
path, how, key = sys.argv[1], sys.argv[2], eval(sys.argv[3])
if how == 'lazy':
    import nczarr_conformance as ncz
    var = ncz.open(path)['v']
    select = lambda: var[key]
else:
    import xarray as xr
    var = xr.open_dataset(path, engine='nczarr')['v']
    select = lambda: var[key].values
before = hwm()
try:
    out = select()
    result = {'shape': list(out.shape), 'values': out.ravel()[:16].tolist()}
except BaseException as exc:
    result = {'error': type(exc).__name__, 'module': type(exc).__module__, 'message': str(exc)}
result.update(before=before, after=hwm())
print(json.dumps(result))
"""


def select_in_child(path: Path, how: str, key: str, cap: str | None = None) -> dict[str, Any]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("NCZARR_MAX_IN_MEMORY", None)
    if cap is not None:
        env["NCZARR_MAX_IN_MEMORY"] = cap
    done = subprocess.run([sys.executable, "-c", _CHILD, str(path), how, key], capture_output=True, text=True,
                          check=False, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# ---- item 13: the budget before any index array --------------------------------------------------------------------

@pytest.mark.parametrize("how", ["lazy", "xarray"])
@pytest.mark.parametrize("rows", [300_000_000, 10**12], ids=["3e8", "1e12"])
def test_a_column_over_budget_is_refused_before_any_index_vector(tmp_path, how, rows):
    # 3e8 rows (2.4 GB) is over an explicit 256 MiB cap; 1e12 (8 TB) over the default, a share of this machine
    store = hand_made(tmp_path / "s", [rows, 2], [1_000_000, 2])
    result = select_in_child(store, how, "(slice(None), 0)", cap="256M" if rows == 300_000_000 else None)
    assert result.get("error") == "LimitError", result  # not numpy's MemoryError "Unable to allocate ..."
    assert f"selection of shape [{rows}, 1]" in result["message"] and "NCZARR_MAX_IN_MEMORY" in result["message"]
    assert "\n" not in result["message"]
    # an index vector of the declared length alone would take rows x 8 bytes (2.4 GB at 3e8)
    grew = result["after"] - result["before"]
    assert grew < 64 * MiB, f"peak RSS grew {grew / MiB:.0f} MiB during the refused selection"


@pytest.mark.parametrize("how", ["lazy", "xarray"])
def test_empty_selection_across_a_huge_dimension_builds_nothing(tmp_path, how):
    store = hand_made(tmp_path / "s", [2, 10**12], [1, 1_000_000])
    result = select_in_child(store, how, "(slice(1, 1), slice(None))")
    assert result.get("shape") == [0, 10**12], result
    assert result["after"] - result["before"] < 64 * MiB


@pytest.mark.parametrize("how", ["lazy", "xarray"])
def test_a_selection_within_budget_still_reads_what_zarr_python_reads(tmp_path, how):
    zarr = pytest.importorskip("zarr")
    store = hand_made(tmp_path / "s", [300_000_000, 2], [1_000_000, 2])
    chunk = np.arange(2_000_000, dtype="<f8").reshape(1_000_000, 2)
    (store / "v" / "299.0").write_bytes(chunk.tobytes())  # rows 299e6 .. 300e6
    key = "(slice(299_999_990, None, 3), 1)"
    result = select_in_child(store, how, key)
    expected = zarr.open_array(str(store / "v"), mode="r", zarr_format=2)[eval(key)]
    assert result.get("shape") == list(expected.shape) and result["values"] == expected.tolist(), result
    assert result["after"] - result["before"] < 64 * MiB  # one 16 MB chunk, a four-element selection


# ---- item 14: geometry outside int64 ---------------------------------------------------------------------------------

def cli(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", f"nczarr_conformance.cli.{tool}", *args], capture_output=True,
                          text=True, check=False, timeout=60)


#: (shape, chunks, dtype, what the one line names): each leaves int64 in exactly one way named first
BEYOND = {
    "extent": ([2**63, 2], [1000, 2], "<f8", "dimension 0 has extent 9223372036854775808"),
    "extent-2^64": ([2**64 + 5], [10], "<f8", "dimension 0 has extent 18446744073709551621"),
    "chunk-extent": ([10], [2**63], "|u1", "the chunks of dimension 0 have extent 9223372036854775808"),
    "grid-span": ([INT64_MAX], [2**62 + 1], "|u1", "the chunk grid of dimension 0 spans 9223372036854775810"),
    "chunk-bytes": ([3, 2**60], [1, 2**60], "<f8", "one chunk holds 9223372036854775808 bytes"),
    "elements": ([2**40, 2**40], [1, 1000], "|u1", "the array holds 1208925819614629174706176 elements"),
    "bytes": ([2**61], [1000], "<f8", "the array holds 18446744073709551616 bytes"),
}


@pytest.mark.parametrize("case", list(BEYOND))
def test_geometry_outside_int64_is_one_line_a_finding_and_our_error(tmp_path, case):
    from nczarr_conformance.errors import FormatError

    shape, chunks, dtype, what = BEYOND[case]
    store = hand_made(tmp_path / "s", shape, chunks, dtype)
    for args in ((), ("-h",), ("--json",)):
        dumped = cli("dump", *args, str(store))
        lines = dumped.stderr.strip().splitlines()
        assert dumped.returncode == 2 and len(lines) == 1 and "Traceback" not in dumped.stderr, dumped.stderr
        assert "/v/.zarray" in lines[0] and what in lines[0] and "int64" in lines[0], lines[0]
        assert dumped.stdout == ""
    checked = cli("check", str(store))
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert f"error NCZ-ARRAY-INT64 /v/.zarray: {what}" in checked.stdout, checked.stdout
    import xarray as xr

    import nczarr_conformance as ncz

    for opener in (lambda: xr.open_dataset(store, engine="nczarr")["v"][0:2].values, lambda: ncz.open(store)["v"][0:2]):
        with pytest.raises(FormatError, match=what):  # never numpy's OverflowError or ValueError
            opener()


def test_geometry_at_the_int64_bound_reads_as_zarr_python_reads_it(tmp_path):
    zarr = pytest.importorskip("zarr")
    store = hand_made(tmp_path / "s", [INT64_MAX], [1], "|u1")
    checked = cli("check", str(store))
    assert "NCZ-ARRAY-INT64" not in checked.stdout and checked.returncode == 0, checked.stdout
    import nczarr_conformance as ncz

    with ncz.open(store) as ds:
        ours = ds["v"][-3:]
    expected = zarr.open_array(str(store / "v"), mode="r", zarr_format=2)[-3:]
    assert ours.tolist() == expected.tolist() and ours.dtype == expected.dtype
