"""Issue 39: a symbolic link inside a directory store is refused the same way by every writer.

Our readers open each object with O_NOFOLLOW and refuse a link, and ``nczarr-fix --out`` (a copy read
through the reader) refused it; the writers that update a store aside (in-place ``nczarr-fix``,
``nczarr-fix --to-v3``, ``nc2nczarr --append``) copied links as links and exited 0, keeping an object no
reader of ours reads, pointing out of the store. Now each refuses it in one line naming the link, exit 2
(StoreError, docs/guarantees.md), the store untouched.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nczarr_conformance as ncz
from tests.conftest import require_module

LINE = "{store}/v/2: 2 is a symbolic link; objects must be regular files inside the store"


def _file(path: Path, start: int) -> Path:
    netCDF4 = require_module("netCDF4")
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("time", None)
        ds.createVariable("time", "f8", ("time",))[:] = np.arange(start, start + 3)
        ds.createVariable("v", "i4", ("time",), chunksizes=(1,))[:] = np.arange(start, start + 3)
    return path


@pytest.fixture
def linked(tmp_path: Path) -> Path:
    """A store whose chunk v/2 (not the first, which nczarr-fix's verification samples) is a symlink out."""
    store = tmp_path / "s.file"
    ncz.convert(str(_file(tmp_path / "a.nc", 0)), str(store))
    outside = tmp_path / "outside-chunk"
    os.replace(store / "v" / "2", outside)
    os.symlink(outside, store / "v" / "2")
    return store


def _tree(store: Path) -> dict[str, bytes | str]:
    return {str(p.relative_to(store)): os.readlink(p) if p.is_symlink() else p.read_bytes()
            for p in sorted(store.rglob("*")) if p.is_symlink() or p.is_file()}


def _run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", f"nczarr_conformance.cli.{module}", *args], capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.mark.parametrize("how", ["fix", "fix --to-v3", "append"])
def test_a_writer_updating_a_store_refuses_a_symlinked_chunk_in_one_line(linked, tmp_path, how):
    if how == "fix":  # a stale .zmetadata: something for the fix to do in place
        zattrs = linked / "v" / ".zattrs"
        zattrs.write_text(json.dumps({**json.loads(zattrs.read_text()), "note": "x"}))
    new = _file(tmp_path / "b.nc", 3)
    before = _tree(linked)
    if how == "append":
        done = _run("convert", "--append", "time", str(new), str(linked))
    else:
        done = _run("fix", *how.split()[1:], str(linked))
    tool = "nc2nczarr" if how == "append" else "nczarr-fix"
    assert (done.returncode, done.stderr) == (2, f"{tool}: {LINE.format(store=linked)}\n"), done.stderr
    assert _tree(linked) == before and (linked / "v" / "2").is_symlink()
    assert not [p for p in tmp_path.iterdir() if ".partial" in p.name]


def test_nczarr_fix_out_and_the_reader_refuse_it_in_the_same_words(linked, tmp_path):
    done = _run("fix", "--out", str(tmp_path / "copy.file"), str(linked))
    assert (done.returncode, done.stderr) == (2, f"nczarr-fix: {LINE.format(store=linked)}\n"), done.stderr
    done = _run("dump", str(linked))
    assert done.returncode == 2 and done.stderr == f"nczarr-dump: {LINE.format(store=linked)}\n", done.stderr
