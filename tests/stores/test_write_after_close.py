"""A store refuses a write once committed or aborted, by put and by put_extent alike, and counts each write."""
from __future__ import annotations

import os

import pytest

from nczarr_conformance.errors import StoreError
from nczarr_conformance.stores import open_store


@pytest.mark.parametrize("how", ["commit", "abort"])
def test_writes_after_the_end_are_refused_and_counted_writes_are_the_ones_made(tmp_path, how):
    source = tmp_path / "chunk.bin"
    source.write_bytes(b"0123456789")
    store = open_store(str(tmp_path / "o.zarr"), "w")
    store.put("/.zgroup", b'{"zarr_format": 2}')
    fd = os.open(source, os.O_RDONLY)
    try:
        store.put_extent("/x", fd, 2, 5)
        assert store.writes == 2
        getattr(store, how)()
        with pytest.raises(StoreError, match="written after it was committed or aborted"):
            store.put("/y", b"late")
        with pytest.raises(StoreError, match="written after it was committed or aborted"):
            store.put_extent("/z", fd, 0, 1)
    finally:
        os.close(fd)
    assert store.writes == 2
    if how == "commit":
        assert (tmp_path / "o.zarr" / "x").read_bytes() == b"23456"
        assert not (tmp_path / "o.zarr" / "y").exists() and not (tmp_path / "o.zarr" / "z").exists()
