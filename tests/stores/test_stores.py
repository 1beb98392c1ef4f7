"""The store contract, once for every backend, plus each backend's own promises."""
from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from nczarr_conformance.errors import FormatError, StoreError
from nczarr_conformance.stores import DirectoryStore, MemoryStore, ZipStore, open_store


class StoreContract:
    """Subclasses make a writable store and reopen what they wrote for reading."""

    def writable(self, tmp_path: Path):
        raise NotImplementedError

    def reopen(self, store):
        return store

    def test_put_get_list(self, tmp_path):
        store = self.writable(tmp_path)
        store.put("/.zgroup", b"{}")
        store.put("/a/.zarray", b"x")
        store.put("/a/0.0", b"")
        store.put("/g/b/1", b"y")
        store = self.reopen(store)
        assert store.get("/.zgroup") == b"{}"
        assert store.get("/a/0.0") == b""  # zero-length objects exist
        assert store.get("/missing") is None
        assert store.list_prefix("/a") == ["/a/.zarray", "/a/0.0"]
        assert store.list_dir("/") == [".zgroup", "a", "g"]
        assert store.list_dir("/g") == ["b"]

    def test_rejects_escaping_keys(self, tmp_path):
        store = self.writable(tmp_path)
        with pytest.raises(FormatError):
            store.put("/../evil", b"x")
        with pytest.raises(FormatError):
            store.get("/a/../../etc/passwd")


class TestMemoryStore(StoreContract):
    def writable(self, tmp_path):
        return MemoryStore()

    def test_delete(self):
        store = MemoryStore()
        store.put("/k", b"v")
        store.delete("/k")
        assert store.get("/k") is None


class TestDirectoryStore(StoreContract):
    def writable(self, tmp_path):
        self.target = tmp_path / "ds.file"
        return DirectoryStore(self.target, "w")

    def reopen(self, store):
        store.commit()
        return DirectoryStore(self.target, "r")

    def test_nothing_at_target_until_commit(self, tmp_path):
        store = self.writable(tmp_path)
        store.put("/.zgroup", b"{}")
        assert not self.target.exists()
        store.abort()
        assert not self.target.exists()
        assert list(tmp_path.iterdir()) == []

    def test_refuses_existing_target(self, tmp_path):
        (tmp_path / "ds.file").mkdir()
        with pytest.raises(StoreError):
            DirectoryStore(tmp_path / "ds.file", "w")

    def test_overwrite_replaces(self, tmp_path):
        target = tmp_path / "ds.file"
        target.mkdir()
        (target / ".zgroup").write_text("{}")
        (target / "a").mkdir()
        (target / "a" / ".zarray").write_text("{}")
        (target / "a" / "0.0").write_text("x")
        store = DirectoryStore(target, "w", overwrite=True)
        store.put("/new", b"y")
        store.commit()
        assert sorted(p.name for p in target.iterdir()) == ["new"]

    def test_overwrite_refuses_what_is_not_a_dataset(self, tmp_path):
        target = tmp_path / "ds.file"
        target.mkdir()
        (target / ".zgroup").write_text("{}")
        (target / "notes.txt").write_text("mine")
        with pytest.raises(StoreError, match=r"notes\.txt, which is not part of a Zarr dataset"):
            DirectoryStore(target, "w", overwrite=True)
        assert (target / "notes.txt").read_text() == "mine"


class TestZipStore(StoreContract):
    def writable(self, tmp_path):
        self.target = tmp_path / "ds.zip"
        return ZipStore(self.target, "w")

    def reopen(self, store):
        store.commit()
        return ZipStore(self.target, "r")

    def test_netcdf_c_layout_and_reads_both(self, tmp_path):
        store = self.writable(tmp_path)
        store.put("/.zgroup", b"{}")
        store.commit()
        assert zipfile.ZipFile(self.target).namelist() == ["ds/.zgroup"]
        flat = tmp_path / "flat.zip"
        with zipfile.ZipFile(flat, "w") as zf:
            zf.writestr(".zgroup", "{}")
        assert ZipStore(flat).get("/.zgroup") == b"{}"

    def test_write_once(self, tmp_path):
        store = self.writable(tmp_path)
        store.put("/k", b"1")
        with pytest.raises(StoreError):
            store.put("/k", b"2")
        store.abort()
        assert not self.target.exists()

    def test_dotdot_members_are_never_served(self, tmp_path):
        evil = tmp_path / "evil.zip"
        with zipfile.ZipFile(evil, "w") as zf:
            zf.writestr(".zgroup", "{}")
            zf.writestr("../escape", "x")
            zf.writestr("/abs", "x")
        store = ZipStore(evil)
        assert store.unsafe_members == ["../escape", "/abs"]
        assert store.list_prefix("/") == ["/.zgroup"]
        assert not (tmp_path.parent / "escape").exists()

    def test_not_a_zip(self, tmp_path):
        bad = tmp_path / "bad.zip"
        bad.write_bytes(b"hello")
        with pytest.raises(FormatError):
            ZipStore(bad)


def test_open_store_missing(tmp_path):
    with pytest.raises(StoreError):
        open_store(str(tmp_path / "nope.zip"))
    with pytest.raises(StoreError):
        open_store(str(tmp_path / "nope.file"))


def test_worker_part_views_refuse_metadata_and_never_create_the_tree(tmp_path):
    """stores/part.py: a worker's view puts chunks only, below a tree the client made; once the client has
    removed the tree (an abort) a late worker's put fails and does not bring the tree back."""
    import shutil

    from nczarr_conformance.stores.part import PartSpec, open_part

    root = tmp_path / ".out.partial-1-x"
    with pytest.raises(StoreError, match="the tree being written is gone"):
        open_part(PartSpec("file", root=str(root)))
    assert not root.exists()
    root.mkdir()
    part = open_part(PartSpec("file", root=str(root)))
    part.put("/v/0.0", b"chunk")
    assert (root / "v" / "0.0").read_bytes() == b"chunk"
    for meta in ("/v/.zarray", "/.zgroup", "/.zattrs", "/.zmetadata"):
        with pytest.raises(StoreError, match="metadata is written by the client"):
            part.put(meta, b"{}")
    shutil.rmtree(root)
    with pytest.raises(StoreError, match="the tree being written is gone"):
        part.put("/w/0", b"late")
    assert not root.exists()
