"""Directory tree backend: one file per object, like netcdf-c's ``mode=…,file``.

A store opened for writing builds the tree aside, under a private hidden sibling
``.<name>.partial-<pid>-<random>`` (``mkdtemp``: created exclusively, never through a
symlink), and swaps it onto the target at ``commit()`` with one atomic exchange
(``renameat2``), so a reader sees the old dataset or the new one, never a half-written
one. Appending builds the new tree the same way from hard links to the old objects
(cheap, and the old files are never written: every put is a new file renamed into
place). ``--overwrite`` replaces only a directory that holds nothing but a dataset.
Leftovers of dead writers on the same target are removed when a writer opens.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .. import keys, safety
from ..errors import StoreError
from .base import Store


class DirectoryStore(Store):
    kind = "file"

    def __init__(self, path: str | os.PathLike[str], mode: str = "r", overwrite: bool = False) -> None:
        super().__init__()
        self.target = Path(path)
        self.mode = mode
        self.overwrite = overwrite
        if mode == "r":
            if not self.target.is_dir():
                reason = "not a directory" if self.target.exists() else "no such file or directory"
                raise StoreError(f"{self.target}: {reason}")
            self.root = self.target
        elif mode == "w":
            self.writable = True
            self._real = Path(os.path.realpath(self.target))
            if os.path.lexists(self.target):
                if not overwrite:
                    raise StoreError(f"{self.target}: exists (use --overwrite to replace it)")
                if not self._real.is_dir():
                    raise StoreError(f"{self.target}: not a directory; --overwrite replaces only a dataset directory")
                safety.refuse_foreign(str(self.target), safety.directory_keys(self._real))
            parent = self._real.parent
            if not parent.is_dir():
                raise StoreError(f"{self.target.parent}: no such directory")
            safety.remove_leftovers(self._real)
            self._umask = safety.umask()
            self.root = safety.make_temp_dir(self._real)
        elif mode == "a":
            self.writable = True
            self._real = Path(os.path.realpath(self.target))
            if not self._real.is_dir():
                raise StoreError(f"{self.target}: no such directory")
            safety.remove_leftovers(self._real)
            self._umask = safety.umask()
            self.root = safety.make_temp_dir(self._real)
            try:
                shutil.copytree(self._real, self.root, symlinks=True, copy_function=_link_or_copy,
                                dirs_exist_ok=True)
            except (OSError, shutil.Error) as exc:
                shutil.rmtree(self.root, ignore_errors=True)
                raise StoreError(f"{self.target}: cannot prepare the append: {exc}") from exc
        else:
            raise ValueError(f"bad mode {mode!r}")

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*keys.split(key))

    def _get(self, key: str) -> bytes | None:
        path = self._path(key)
        try:
            return path.read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        except OSError as exc:
            raise StoreError(f"{path}: {exc.strerror}") from exc

    def _put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        tmp: str | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
            with os.fdopen(fd, "wb") as fh:
                os.fchmod(fh.fileno(), 0o666 & ~self._umask)
                fh.write(data)
            os.replace(tmp, path)
        except OSError as exc:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            raise StoreError(f"{self.target}: cannot write {key.lstrip('/')}: {exc.strerror or exc}") from exc
    def _delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        base = self._path(prefix)
        if not base.is_dir():
            return
        for dirpath, _dirnames, filenames in os.walk(base):
            rel = Path(dirpath).relative_to(self.root)
            for name in filenames:
                if name.endswith(".partial"):
                    continue
                yield keys.join(*rel.parts, name)

    def commit(self) -> None:
        if self.mode not in ("w", "a"):
            return
        self._quiesce()
        with safety.critical():
            try:
                safety.raise_if_interrupted()
            except BaseException:
                self._remove_tree()
                raise
            try:
                if self.mode == "w":  # mkdtemp made it private; an append keeps the old tree's mode
                    os.chmod(self.root, 0o777 & ~self._umask)
                if self.mode == "a" or os.path.lexists(self._real):
                    if self.mode == "w" and not self.overwrite:
                        raise StoreError(f"{self.target}: appeared while writing; not replaced")
                    safety.swap_in(self.root, self._real)
                else:
                    os.rename(self.root, self._real)
            except OSError as exc:
                self._remove_tree()
                raise StoreError(f"{self.target}: cannot put the new dataset in place: {exc.strerror or exc}") from exc
            except BaseException:
                self._remove_tree()
                raise
            self.mode = "done"

    def _remove_tree(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self.mode = "done"

    def abort(self) -> None:
        if self.mode in ("w", "a"):
            self._quiesce()
            with safety.critical():
                self._remove_tree()

    def __repr__(self) -> str:
        return f"DirectoryStore('file://{self.target.resolve()}')"


def _link_or_copy(src: str, dst: str) -> None:
    """Hard-link an old object into the new tree (a copy where links are impossible)."""
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)
