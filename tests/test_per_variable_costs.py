"""A conversion of many small variables makes the file-system calls of the objects it writes, and no more.

A netCDF file of thousands of one-chunk variables (netcdf-c's ``ref_hdf5_compat1.nc`` has 2,000) turns
into a directory per variable holding three objects: any cost paid per object or per variable is paid
thousands of times. What this holds, counted in the process (an audit hook on ``open``/``os.mkdir``/
``os.rename``/``os.remove``, and counters on ``os.fsync`` and ``Thread.start``, which raise no audit
event): each object is created once where it stays (no temporary file and rename per object, which a
fresh write's private tree does not need: stores/directory.py ``write_object``), a directory is made
once (not once per object), nothing is synced and no thread is started per variable (a pool per
variable of one chunk once started 2,000 pools: nczarr/writer.py ``_write_chunks``). The objects
themselves are counted against netcdf-c's own: nccopy writes the same ones for the same file.

What stays is the file system's: on this machine's ext4 (no journal) every inode creation skips
the inodes deleted in the last half minute, so nccopy and we pay seconds of system time after a
``rm -rf`` of a previous output, and a tenth of that on a quiet disk (docs/writer.md). No timing here:
counts only.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest

from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.conversion.from_netcdf import convert
from nczarr_conformance.model import diff
from nczarr_conformance.testing.ignores import CONTIGUOUS
from nczarr_conformance.testing.source import read_source
from tests.conftest import require_tool

VARIABLES = 200  # enough that anything paid per variable outnumbers every fixed cost below
FIXED = 4  # calls a whole conversion may make once: the writer lock, the staging directory, the commit
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT

_calls: Counter[str] | None = None  # what the audit hook counts while a conversion is watched
_under: str = ""


def _hook(event: str, args: tuple[Any, ...]) -> None:
    """Count the calls that make or change a file-system entry below ``_under`` (audit hooks stay for the
    process's life: this one counts only inside :func:`_watched`)."""
    if _calls is None or event not in ("open", "os.mkdir", "os.rename", "os.remove"):
        return
    path = args[0]
    if not isinstance(path, (str, bytes, os.PathLike)) or not os.fsdecode(path).startswith(_under):
        return
    if event == "open" and not (isinstance(args[2], int) and args[2] & _WRITE_FLAGS):
        return  # opened for reading
    _calls[event] += 1


sys.addaudithook(_hook)


@contextmanager
def _watched(under: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    global _calls, _under
    calls: Counter[str] = Counter()
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name)

        def counted(fd: int, _real: Any = real, _name: str = name) -> None:
            calls[_name] += 1
            _real(fd)

        monkeypatch.setattr(os, name, counted)
    start = threading.Thread.start

    def counted_start(thread: threading.Thread) -> None:
        calls["thread"] += 1
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted_start)
    _calls, _under = calls, str(under)
    try:
        yield calls
    finally:
        _calls = None


@pytest.fixture(scope="module")
def many_variables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``VARIABLES`` variables of 10 floats each, every one written (one chunk each), as ref_hdf5_compat1.nc
    is laid out (that file's are never written, so it would make no chunk object at all)."""
    path = tmp_path_factory.mktemp("many-variables") / "many.nc"
    with netCDF4.Dataset(str(path), "w") as nc:
        nc.createDimension("x", 10)
        for i in range(VARIABLES):
            nc.createVariable(f"a_{i}", "f4", ("x",))[:] = np.arange(10, dtype="f4") + i
    return path


def _tree(root: Path) -> tuple[list[Path], list[Path]]:
    """The files and the directories below ``root`` (``root`` itself not counted)."""
    entries = list(root.rglob("*"))
    return [p for p in entries if p.is_file()], [p for p in entries if p.is_dir()]


def test_each_object_is_created_once_and_nothing_is_paid_per_variable(many_variables, tmp_path, monkeypatch):
    """Per variable: one directory and three objects created, as nccopy writes them; per conversion, not
    per variable: the writer lock, the staging directory, one rename into place, no fsync, no thread pool."""
    out = tmp_path / "ours.file"
    with _watched(tmp_path, monkeypatch) as calls:
        convert(str(many_variables), str(out))
    files, dirs = _tree(out)
    # the peer: netcdf-c writes the same objects for the same file (we add .zmetadata)
    theirs = tmp_path / "theirs.file"
    subprocess.run([require_tool("nccopy"), str(many_variables), f"file://{theirs}#mode=nczarr,file"], check=True,
                   capture_output=True, timeout=120)
    their_files, their_dirs = _tree(theirs)
    assert len(dirs) == len(their_dirs) == VARIABLES
    assert sorted(p.relative_to(out) for p in files if p.name != ".zmetadata") == sorted(
        p.relative_to(theirs) for p in their_files)
    assert len(files) == 3 * VARIABLES + 3  # a chunk, .zarray and .zattrs each; .zgroup, .zattrs, .zmetadata

    assert calls["open"] <= len(files) + FIXED, calls  # each object created once, where it stays
    assert calls["os.mkdir"] <= len(dirs) + FIXED, calls  # a directory made once
    assert calls["os.rename"] <= FIXED and calls["os.remove"] <= FIXED, calls  # no temporary file per object
    assert calls["fsync"] + calls["fdatasync"] <= FIXED, calls
    assert calls["thread"] <= FIXED, calls
    # storage as well as values: nccopy's array layout and chunk bytes, and the source's values
    storage = ("shape", "dtype", "chunks", "order", "compressor", "filters")
    for name in ("a_0", f"a_{VARIABLES - 1}"):
        ours, nccopy = (json.loads((root / name / ".zarray").read_text()) for root in (out, theirs))
        assert {k: ours[k] for k in storage} == {k: nccopy[k] for k in storage}
        assert (out / name / "0").read_bytes() == (theirs / name / "0").read_bytes()
    assert diff(read_source(str(many_variables)), open_dataset(str(out)), ignore=CONTIGUOUS) == []
