"""Store.get_range: bounded ranged reads on every local backend (S3: tests/zarr3/test_sharding.py)."""
from __future__ import annotations

import os
import zipfile

import pytest

from nczarr_conformance.errors import StoreError
from nczarr_conformance.stores import DirectoryStore, MemoryStore, ZipStore

DATA = bytes(range(100))


def _stores(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "zarr.json").write_bytes(b"{}")
    (tmp_path / "d" / "obj").write_bytes(DATA)
    with zipfile.ZipFile(tmp_path / "s.zip", "w") as zf:
        zf.writestr("zarr.json", b"{}")
        zf.writestr(zipfile.ZipInfo("obj"), DATA, compress_type=zipfile.ZIP_DEFLATED)
    return {"dir": DirectoryStore(str(tmp_path / "d")), "zip": ZipStore(str(tmp_path / "s.zip")),
            "memory": MemoryStore({"/obj": DATA}, writable=False)}


@pytest.mark.parametrize("kind", ["dir", "zip", "memory"])
def test_ranges(tmp_path, kind):
    store = _stores(tmp_path)[kind]
    assert store.get_range("/obj", 10, 5) == (DATA[10:15], 100)
    assert store.get_range("/obj", -7, 7) == (DATA[-7:], 100)
    assert store.get_range("/obj", 95, 50) == (DATA[95:], 100)  # past the end: what is there
    assert store.get_range("/obj", 200, 5) == (b"", 100)
    assert store.get_range("/obj", -500, 500) == (DATA, 100)
    assert store.get_range("/missing", 0, 5) is None
    with pytest.raises(ValueError):
        store.get_range("/obj", 0, -1)


def test_directory_range_follows_no_symlink(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "secret").write_bytes(b"secret")
    os.symlink(tmp_path / "secret", tmp_path / "d" / "obj")
    with pytest.raises(StoreError):
        DirectoryStore(str(tmp_path / "d")).get_range("/obj", 0, 3)
