"""What replaces a user's data is on disk before the old copy goes (safety.sync_tree, safety.replace_file).

A power cut is not something a test can cause. What a test can hold is the order of the system calls
that make one harmless: every file of the new tree (or the new zip, or a rewritten object) fsynced,
then the rename, then its directory fsynced, and only after all of that the old tree removed. Each
test records fsync (by inode) and the removal of trees, in order, while a real command runs. A fresh
output replaces nothing, and is written as cp and nccopy write (no fsync): the last test holds that cost.
"""
from __future__ import annotations

import os
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from nczarr_conformance import safety
from nczarr_conformance.cli import convert, fix
from nczarr_conformance.testing.samples import write_rich_nc
from tests.fix.helpers import c410
from tests.in_process import run_main

Inode = tuple[int, int]


class Journal:
    """fsync and syncfs calls and tree removals, in the order the command made them."""

    def __init__(self, way: str) -> None:
        self.way = way  # "syncfs" or "fsync-each"
        self.events: list[tuple[str, object]] = []

    def synced_before_removal(self, paths: list[Path]) -> list[Path]:
        """Of ``paths``, those not on disk when the first tree was removed (all must be, when none was): neither
        fsynced themselves nor on a file system synced whole (syncfs)."""
        files: set[Inode] = set()
        devices: set[int] = set()
        for kind, what in self.events:
            if kind == "remove":
                break
            if kind == "fsync":
                files.add(what)  # type: ignore[arg-type]
            elif kind == "syncfs":
                devices.add(what)  # type: ignore[arg-type]
        return [p for p in paths if _inode(p) not in files and _inode(p)[0] not in devices]

    def removed(self) -> bool:
        return any(kind == "remove" for kind, _ in self.events)

    def syncs(self) -> int:
        return sum(kind in ("fsync", "syncfs") for kind, _ in self.events)


@pytest.fixture(params=["syncfs", "fsync-each"])
def journal(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Journal]:
    """The command watched; with ``fsync-each``, as on a system without syncfs (each file fsynced instead)."""
    seen = Journal(request.param)
    real_fsync, real_remove, real_syncfs = os.fsync, safety.remove_path, safety.syncfs

    def fsync(fd: int) -> None:
        info = os.fstat(fd)
        seen.events.append(("fsync", (info.st_dev, info.st_ino)))
        real_fsync(fd)

    def syncfs(path: Path) -> bool:
        if request.param == "fsync-each":
            return False
        done = real_syncfs(path)
        assert done, "this system has syncfs: the test would not see the path it names"
        seen.events.append(("syncfs", os.stat(path).st_dev))
        return done

    def remove_path(path: Path) -> None:
        if os.path.isdir(path):
            seen.events.append(("remove", path))
        real_remove(path)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(safety, "syncfs", syncfs)
    monkeypatch.setattr(safety, "remove_path", remove_path)
    yield seen


def _inode(path: Path) -> Inode:
    info = os.stat(path)
    return info.st_dev, info.st_ino


def _tree(root: Path) -> list[Path]:
    return [root, *sorted(root.rglob("*"))]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("src") / "rich.nc"
    write_rich_nc(str(path))
    return path


def test_an_overwritten_directory_store_is_on_disk_before_the_old_one_is_removed(source, tmp_path, journal):
    target = tmp_path / "out.file"
    assert run_main(convert.main, [str(source), str(target)]).returncode == 0
    journal.events.clear()
    done = run_main(convert.main, [str(source), str(target), "--overwrite"])
    assert done.returncode == 0, done.stderr
    assert journal.removed(), "the old tree was never removed: the test saw no swap"
    assert journal.synced_before_removal([*_tree(target), tmp_path]) == []
    if journal.way == "syncfs":  # its point: one call whatever the number of files (0.5 s for 7,300 fsyncs here)
        assert sum(kind == "fsync" for kind, _ in journal.events) <= 2, "files fsynced one by one beside syncfs"


def test_an_overwritten_zip_is_on_disk_before_it_replaces_the_old_one(source, tmp_path, journal):
    target = tmp_path / "out.zip"
    assert run_main(convert.main, [str(source), str(target)]).returncode == 0
    journal.events.clear()
    assert run_main(convert.main, [str(source), str(target), "--overwrite"]).returncode == 0
    assert zipfile.is_zipfile(target)
    assert journal.synced_before_removal([target, tmp_path]) == []


def test_an_in_place_fix_has_its_backup_and_its_new_tree_on_disk_before_the_old_tree_goes(tmp_path, journal):
    store = c410(tmp_path / "n.file", byte=True, shuffle=True)
    done = run_main(fix.main, [str(store)])
    assert done.returncode == 0, done.stderr
    backup = next(p for p in tmp_path.iterdir() if p.name.startswith("n.file.nczarr-fix-backup-"))
    assert journal.removed()
    assert journal.synced_before_removal([*_tree(backup), *_tree(store)]) == []


def test_a_rewritten_object_of_a_store_updated_in_place_is_on_disk_before_its_rename(tmp_path, journal):
    """Mode "u" (an object replaced in the live store, nczarr-fix's S3-like path on a directory): the new bytes
    fsynced before the rename over the only copy, and the directory after it."""
    from nczarr_conformance.stores.directory import DirectoryStore

    store = c410(tmp_path / "n.file", byte=True)
    with DirectoryStore(store, "u") as live:
        live.put("/b/.zattrs", b'{"x": 1}')
        live.commit()
    assert (store / "b" / ".zattrs").read_bytes() == b'{"x": 1}'
    assert journal.synced_before_removal([store / "b" / ".zattrs", store / "b"]) == []


def test_a_fresh_output_is_written_as_cp_writes_it_without_fsync(source, tmp_path, journal):
    """Nothing is replaced, so nothing can be lost: no fsync, the cost of cp and nccopy (benchmarks/run.py)."""
    assert run_main(convert.main, [str(source), str(tmp_path / "out.file")]).returncode == 0
    assert run_main(convert.main, [str(source), str(tmp_path / "out.zip")]).returncode == 0
    assert journal.syncs() == 0
