"""Directory tree backend: one file per object, like netcdf-c's ``mode=…,file``.

A store opened for writing builds the tree under a hidden sibling
``.<name>.partial-<pid>`` and renames it onto the target at ``commit()``, so a
failed conversion never leaves a half-written dataset at the target.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from .. import keys
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
            if self.target.exists() and not overwrite:
                raise StoreError(f"{self.target}: exists (use --overwrite to replace it)")
            parent = self.target.parent
            if not parent.is_dir():
                raise StoreError(f"{parent}: no such directory")
            self.root = parent / f".{self.target.name}.partial-{os.getpid()}"
            shutil.rmtree(self.root, ignore_errors=True)
            self.root.mkdir()
        elif mode == "a":
            self.writable = True
            if not self.target.is_dir():
                raise StoreError(f"{self.target}: no such directory")
            self.root = self.target
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
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".partial")
        tmp.write_bytes(data)
        os.replace(tmp, path)

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
        if self.mode != "w":
            return
        if self.target.exists():
            if not self.overwrite:
                raise StoreError(f"{self.target}: appeared while writing; not replaced")
            old = self.target.parent / f".{self.target.name}.old-{os.getpid()}"
            os.replace(self.target, old)
            os.replace(self.root, self.target)
            if old.is_dir():
                shutil.rmtree(old)
            else:
                old.unlink()
        else:
            os.replace(self.root, self.target)
        self.mode = "done"

    def abort(self) -> None:
        if self.mode == "w":
            shutil.rmtree(self.root, ignore_errors=True)
            self.mode = "done"

    def __repr__(self) -> str:
        return f"DirectoryStore('file://{self.target.resolve()}')"
