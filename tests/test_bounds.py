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


def select_in_child(path: Path, how: str, key: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-c", _CHILD, str(path), how, key], capture_output=True, text=True,
                          check=False, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# ---- item 13: the budget before any index array --------------------------------------------------------------------

@pytest.mark.parametrize("how", ["lazy", "xarray"])
@pytest.mark.parametrize("rows", [300_000_000, 10**12], ids=["3e8", "1e12"])
def test_a_column_over_budget_is_refused_before_any_index_vector(tmp_path, how, rows):
    store = hand_made(tmp_path / "s", [rows, 2], [1_000_000, 2])
    result = select_in_child(store, how, "(slice(None), 0)")
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
