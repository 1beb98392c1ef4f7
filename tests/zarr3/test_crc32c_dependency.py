"""`--shard` needs numcodecs' CRC32C (every shard index carries a crc32c): a dependency; its absence one line.

numcodecs registers ``CRC32C`` only when a crc32c implementation imports (``google_crc32c``, or the older
``crc32c`` it still falls back to); without one, ``numcodecs.CRC32C`` is an AttributeError that named nothing.
The subprocesses below hide both modules (``sys.modules[name] = None``: import and ``find_spec`` see nothing)
and assert that numcodecs then has no CRC32C, so the simulation is proven before the command runs.
"""
from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from nczarr_conformance.codecs import CRC32C_PACKAGE
from tests.conftest import CORPUS, REPO

#: runs one of our commands in a Python where no crc32c implementation can be imported
WITHOUT_CRC32C = """
import sys
sys.modules["google_crc32c"] = None
sys.modules["crc32c"] = None
import numcodecs
assert not hasattr(numcodecs, "CRC32C"), "the crc32c implementations are still importable"
import importlib
sys.argv[0] = sys.argv[1]
sys.exit(importlib.import_module("nczarr_conformance.cli." + sys.argv[1]).main(sys.argv[2:]))
"""


def run_without_crc32c(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", WITHOUT_CRC32C, module, *args], capture_output=True, text=True,
                          check=False, timeout=120)


def assert_names_the_package(done: subprocess.CompletedProcess[str], where: str) -> None:
    assert done.returncode == 2, done
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert where in lines[0] and f"pip install {CRC32C_PACKAGE}" in lines[0], lines[0]
    assert "this is a bug" not in lines[0] and "Traceback" not in done.stderr


def test_shard_without_the_package_is_one_line_exit_2_nothing_written(tmp_path: Path) -> None:
    out = tmp_path / "sharded"
    done = run_without_crc32c("convert", str(CORPUS / "rich.nc"), str(out), "--zarr-format", "3", "--shard", "8",
                              "-q")
    assert_names_the_package(done, "/time: ")  # the first sharded array: rich.nc's time coordinate
    assert not out.exists()


def test_reading_a_sharded_store_without_the_package_is_one_line_exit_2(tmp_path: Path) -> None:
    zarr = pytest.importorskip("zarr")
    g = zarr.open_group(str(tmp_path / "s.zarr"), mode="w", zarr_format=3)
    g.create_array("v", shape=(8,), chunks=(2,), shards=(4,), dtype="int32", dimension_names=["t"])[:] = range(8)
    done = run_without_crc32c("dump", str(tmp_path / "s.zarr"))
    assert_names_the_package(done, "/v/c/0")


def test_the_package_named_is_a_runtime_dependency_numcodecs_uses() -> None:
    """The line tells the user to install a package that ``pip install nczarr-conformance`` installs, and
    that numcodecs builds its CRC32C on (its ``checksum32`` module imported it here)."""
    import numcodecs.checksum32

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert CRC32C_PACKAGE in {Requirement(r).name for r in project["dependencies"]}
    module = CRC32C_PACKAGE.replace("-", "_")
    assert getattr(numcodecs.checksum32, module).__name__ == module
