"""The command lines: conversion, dump, and bad input (one line, exit 2, nothing written)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from nczarr_conformance.model import Dataset, diff
from nczarr_conformance.testing.ignores import CONTIGUOUS
from nczarr_conformance.testing.source import read_source
from tests.test_model import SCHEMA


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    module = {"nc2nczarr": "nczarr_conformance.cli.convert", "nczarr-dump": "nczarr_conformance.cli.dump"}[args[0]]
    return subprocess.run([sys.executable, "-m", module, *args[1:]], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def assert_clean_failure(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize("suffix", [".zip", ".file"])
def test_convert_then_dump_json_equals_source(rich_nc, tmp_path, suffix):
    out = tmp_path / f"rich{suffix}"
    result = run("nc2nczarr", str(rich_nc), str(out))
    assert result.returncode == 0, result.stderr
    assert "objects" in result.stderr  # the summary line
    dumped = run("nczarr-dump", "--json", "--storage", str(out))
    assert dumped.returncode == 0, dumped.stderr
    doc = json.loads(dumped.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert diff(read_source(str(rich_nc)), Dataset.from_json(doc), ignore=CONTIGUOUS) == []


def test_convert_to_netcdf_c_url(rich_nc, tmp_path):
    url = f"file://{tmp_path}/u.zip#mode=nczarr,zip"
    assert run("nc2nczarr", str(rich_nc), url).returncode == 0
    assert (tmp_path / "u.zip").is_file()
    assert run("nczarr-dump", "--header", url).returncode == 0


def test_dump_cdl_and_header(rich_nc, tmp_path):
    out = tmp_path / "r.zip"
    run("nc2nczarr", str(rich_nc), str(out))
    full = run("nczarr-dump", str(out)).stdout
    header = run("nczarr-dump", "--header", str(out)).stdout
    assert full.startswith("netcdf r {") and "data:" in full and "partial =" in full
    assert "data:" not in header and "time = UNLIMITED ; // (6 currently)" in header
    assert ':j_nested = "{\\"key1\\": [1,2,3], \\"key2\\": {\\"key3\\": \\"abc\\"}}" ;' in full


def test_dump_json_header_has_no_data(rich_nc, tmp_path):
    out = tmp_path / "r.file"
    run("nc2nczarr", str(rich_nc), str(out))
    doc = json.loads(run("nczarr-dump", "--json", "--header", str(out)).stdout)
    jsonschema.validate(doc, SCHEMA)
    assert all("data" not in v for v in doc["root"]["variables"].values())


def test_missing_input(tmp_path):
    result = run("nc2nczarr", str(tmp_path / "nope.nc"), str(tmp_path / "o.zip"))
    assert_clean_failure(result)
    assert list(tmp_path.iterdir()) == []


def test_input_not_netcdf(tmp_path):
    bad = tmp_path / "bad.nc"
    bad.write_text("not netcdf at all")
    result = run("nc2nczarr", str(bad), str(tmp_path / "o.zip"))
    assert_clean_failure(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.nc"]


@pytest.mark.parametrize("name", ["exists.zip", "exists.file"])
def test_output_exists_is_refused_and_untouched(rich_nc, tmp_path, name):
    target = tmp_path / name
    if name.endswith(".zip"):
        target.write_bytes(b"precious")
    else:
        target.mkdir()
        (target / "precious").write_text("x")
    result = run("nc2nczarr", str(rich_nc), str(target))
    assert_clean_failure(result)
    assert "--overwrite" in result.stderr
    if name.endswith(".zip"):
        assert target.read_bytes() == b"precious"
    else:
        assert [p.name for p in target.iterdir()] == ["precious"]
    # --overwrite replaces a dataset only: "precious" is not one (tests/test_output_safety.py)
    assert_clean_failure(run("nc2nczarr", "--overwrite", str(rich_nc), str(target)))
    dataset = tmp_path / ("again" + target.suffix)
    assert run("nc2nczarr", str(rich_nc), str(dataset)).returncode == 0
    assert run("nc2nczarr", "--overwrite", str(rich_nc), str(dataset)).returncode == 0


def test_failed_conversion_leaves_nothing(rich_nc, tmp_path):
    """nczarr-2-upper cannot hold strings: the conversion fails after planning, and no output remains."""
    result = run("nc2nczarr", "--flavor", "nczarr-2-upper", str(rich_nc), str(tmp_path / "o.file"))
    assert_clean_failure(result)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("make", ["empty_dir", "plain_file", "empty_zip", "missing"])
def test_dump_of_non_dataset(tmp_path, make):
    target = tmp_path / "thing"
    if make == "empty_dir":
        target.mkdir()
    elif make == "plain_file":
        target.write_text("hello")
    elif make == "empty_zip":
        import zipfile

        target = tmp_path / "thing.zip"
        zipfile.ZipFile(target, "w").close()
    result = run("nczarr-dump", str(target))
    assert_clean_failure(result)
    assert result.stdout == ""



def test_dump_of_a_store_whose_root_is_a_bare_zarr_array(tmp_path):
    """A Zarr array written at the store's root (zarr-python's open_array on a path) has no root group, which netCDF
    needs: exactly one line naming the store and the cause, exit 2 (netcdf-c 4.10.1 opens it as an empty dataset; we
    refuse rather than show nothing). Run from an empty bytecode cache, as a first run after installing is: a
    warning Python prints while compiling the reader would be a second line."""
    zarr = pytest.importorskip("zarr")
    target = tmp_path / "bare.zarr"
    zarr.open_array(str(target), mode="w", shape=(3,), dtype="i4", zarr_format=2)[:] = [1, 2, 3]
    result = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.dump", str(target)], capture_output=True,
                            text=True, timeout=120, env={**os.environ, "PYTHONPYCACHEPREFIX": str(tmp_path / "pyc")})
    assert_clean_failure(result)
    assert result.stderr.strip() == (f"nczarr-dump: {target}: the root is a bare Zarr array, not a group; "
                                     "netCDF needs a root group")


def test_dump_of_corrupt_metadata(tmp_path, rich_nc):
    out = tmp_path / "r.file"
    run("nc2nczarr", str(rich_nc), str(out))
    (out / "v_i4" / ".zarray").write_text("{not json")
    assert_clean_failure(run("nczarr-dump", str(out)))


def test_readme_first_lines_name_the_two_commands():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text().splitlines()
    head = "\n".join(readme[:12])
    assert "pip install" in head and "nc2nczarr" in head and "./scripts/test" in head


def test_ci_runs_exactly_the_readme_test_command():
    """.ci/run's last command is README's second block, which installs everything and runs pytest."""
    repo = Path(__file__).resolve().parents[2]
    blocks = (repo / "README.md").read_text(encoding="utf-8").split("```sh\n")
    second = blocks[2].split("```")[0].strip()
    ci = [line for line in (repo / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-1] == second
    script = (repo / "scripts" / "test").read_text()
    assert "pip install" in script and "'.[test]'" in script and "-m pytest -q" in script


def test_dump_of_an_empty_directory_names_what_v2_and_v3_look_for(tmp_path):
    """Not "neither /.zgroup nor /.zarray exists": a v3 reader looked for /zarr.json too."""
    result = run("nczarr-dump", str(tmp_path))
    assert_clean_failure(result)
    assert result.stderr == (f"nczarr-dump: {tmp_path}: no dataset here: none of /.zgroup, /.zarray (Zarr v2) or "
                             "/zarr.json (Zarr v3) exists\n")
