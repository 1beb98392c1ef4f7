"""Hypothesis properties: generated netCDF-4 models through every store and every peer.

Profiles: ``ci`` (default), ``nightly`` and ``deep`` (``HYPOTHESIS_PROFILE=...``), see conftest.
Every property also runs ``strategies.corners()``: one model with every corner at once.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given, settings

from nczarr_conformance.model import Dataset, diff
from nczarr_conformance.nczarr.reader import read_dataset
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.stores import DirectoryStore, ZipStore
from nczarr_conformance.testing.ignores import CONTIGUOUS
from nczarr_conformance.testing.strategies import corners, datasets


class Scratch:
    """A fresh directory per Hypothesis example (function-scoped fixtures are shared across examples)."""

    def __enter__(self) -> Path:
        self.path = Path(tempfile.mkdtemp(prefix="ncz-prop-"))
        return self.path

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def write_dir_and_zip(model: Dataset, where: Path) -> tuple[Path, Path]:
    with DirectoryStore(where / "d.file", "w") as store:
        write_dataset(model, store)
    with ZipStore(where / "z.zip", "w") as store:
        write_dataset(model, store)
    return where / "d.file", where / "z.zip"


@given(datasets())
@example(corners())
def test_write_read_identity_dir_and_zip_and_identical_objects(model):
    with Scratch() as where:
        dpath, zpath = write_dir_and_zip(model, where)
        d, z = DirectoryStore(dpath), ZipStore(zpath)
        assert diff(model, read_dataset(d), ignore=CONTIGUOUS) == []
        assert diff(model, read_dataset(z), ignore=CONTIGUOUS) == []
        assert d.list_prefix("/") == z.list_prefix("/")
        for key in d.list_prefix("/"):
            assert d.get(key) == z.get(key), key


@pytest.mark.s3
# one level: S3 keys nest like dir/zip ones (tested 2 deep); each PUT is an HTTP call. A quarter of the profile's
# examples (25 under ci, 125 nightly): the model space is drawn in full by the dir/zip property above, the same
# writer and reader; what S3 adds is the store's keys and bytes, which every model (and corners()) exercises
@settings(max_examples=max(10, settings.default.max_examples // 4))
@given(model=datasets(max_depth=1))
@example(model=corners())
def test_write_read_identity_s3_and_same_objects(model, s3_bucket, request):
    from nczarr_conformance.stores.s3 import S3Store

    prefix = f"prop/{abs(hash(model.canonical_text())) % 10**12}"
    with S3Store(s3_bucket, prefix, mode="w", overwrite=True) as store:
        write_dataset(model, store)
    s3 = S3Store(s3_bucket, prefix)
    assert diff(model, read_dataset(s3), ignore=CONTIGUOUS) == []
    from nczarr_conformance.stores import MemoryStore

    memory = MemoryStore()
    write_dataset(model, memory)
    assert s3.list_prefix("/") == sorted(memory.objects)
    assert all(s3.get(k) == v for k, v in memory.objects.items())
