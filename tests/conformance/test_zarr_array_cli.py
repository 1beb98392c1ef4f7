"""adapters/zarr-conformance-action/nczarr-array-cli, our reader behind the Zarr conformance action's CLI contract
(``ZARR_CLI --array_path=PATH``: print the array, exit 0): on arrays shaped like that project's six cases, written
here by zarr-python (the project ships no licence, so its data is not copied), what the command prints is what
zarr-python reads, printed by numpy the same way."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO

zarr = pytest.importorskip("zarr")

CLI = REPO / "adapters" / "zarr-conformance-action" / "nczarr-array-cli"

#: the action's cases: name → (zarr_format, dtype, shape, chunks, order)
CASES = {
    "int64-v2-F-order-i4": (2, "<i4", (4, 4), (2, 2), "F"),
    "int32-v2": (2, "<i4", (6, 4), (2, 4), "C"),
    "int32-v3": (3, "int32", (2, 2), (2, 2), "C"),
    "float64-v2": (2, "<f8", (6, 4), (2, 4), "C"),
    "float32-v2": (2, "<f4", (6, 4), (2, 4), "C"),
}


def run(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CLI), f"--array_path={path}"], capture_output=True, text=True,
                          timeout=120, check=False)


def make(path: Path, zarr_format: int, dtype: str, shape: tuple[int, ...], chunks: tuple[int, ...],
         order: str) -> None:
    values = (np.arange(np.prod(shape)).reshape(shape) * 1.5 - 3).astype(dtype)
    layout = {"order": order} if zarr_format == 2 else {}  # v3 has no order: zarr-python warns
    array = zarr.create_array(str(path), shape=shape, chunks=chunks, dtype=dtype, zarr_format=zarr_format,
                              fill_value=0, **layout)
    array[...] = values


def printed_by_zarr_python(path: Path) -> str:
    with np.printoptions(threshold=sys.maxsize):
        return f"{zarr.open_array(str(path), mode='r')[...]}\n"


@pytest.mark.parametrize("name", sorted(CASES))
def test_prints_what_zarr_python_prints(tmp_path, name):
    path = tmp_path / f"{name}.zarr"
    make(path, *CASES[name])
    done = run(path)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == printed_by_zarr_python(path)


def test_a_boolean_array_is_exit_1_and_one_line_naming_the_type(tmp_path):
    path = tmp_path / "bool.zarr"
    zarr.create_array(str(path), shape=(2,), chunks=(2,), dtype="bool", zarr_format=2)[...] = [True, False]
    done = run(path)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and str(path) in done.stderr and "boolean" in done.stderr


def test_a_path_that_is_no_array_is_exit_1_and_one_line(tmp_path):
    done = run(tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "neither .zarray nor zarr.json" in done.stderr
