"""Canonical model → Zarr v3 in the layout a flavor names: pure Zarr v3 (``v3_writer.py``, where the module
docstring says what is written and why), NZ-1.0 (``nz_writer.py``) or netcdf-c's draft NCZarr v3
(``draft_writer.py``), both subclasses of the plain writer.

The front door the other wings call: the plain writer's names are re-exported here, and this module sits
above the three writers so none of them imports the module that chooses between them.
"""
from __future__ import annotations

from nczarr_conformance.model import Dataset
from nczarr_conformance.nczarr.writer import ChunkSource, Progress, RawSource, model_source
from nczarr_conformance.stores.base import Store
from nczarr_conformance.zarr3.draft_writer import DraftWriter
from nczarr_conformance.zarr3.nz_writer import NzWriter
from nczarr_conformance.zarr3.v3_writer import (
    V3_NOT_YET,
    V3_WRITE_FLAVORS,
    V3Plan,
    V3Writer,
    fill_json,
    refuse_flavor,
    zlib_to_gzip,
)

#: the writer of each v3 flavor other than pure Zarr v3's (``zarr``: :class:`V3Writer`)
WRITERS: dict[str, type[V3Writer]] = {"nz": NzWriter, "nczarr-v3-draft": DraftWriter}


def write_dataset(dataset: Dataset, store: Store, *, flavor: str = "zarr", source: ChunkSource = model_source,
                  progress: Progress | None = None, threads: int = 4, raw: RawSource | None = None,
                  consolidate: bool | None = None, shard: int | None = None) -> tuple[int, list[str]]:
    """Write ``dataset`` into ``store`` as Zarr v3 (the caller commits or aborts); return the chunks
    copied from the source and the lines naming what the v3 layout did not keep."""
    writer_class = WRITERS.get(flavor, V3Writer)
    writer = writer_class(dataset, store, flavor=flavor, source=source, progress=progress, threads=threads, raw=raw,
                          consolidate=consolidate, shard=shard)
    writer.write()
    return writer.copied, writer.notes


__all__ = ["V3_NOT_YET", "V3_WRITE_FLAVORS", "WRITERS", "V3Plan", "V3Writer", "fill_json", "refuse_flavor",
           "write_dataset", "zlib_to_gzip"]
