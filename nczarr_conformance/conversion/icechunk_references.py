"""``nc2nczarr IN.nc icechunk://PATH --reference``: the Zarr v3 store we would write, as a new Icechunk repository
whose chunks are virtual references into IN.nc (stores/icechunk_store.py's :class:`IcechunkCollector`), one commit.

Icechunk holds Zarr v3 only, so the metadata is the pure Zarr v3 writer's (zarr3/v3_writer.py) with one change:
the codecs are HDF5's own, ``numcodecs.shuffle`` and ``numcodecs.zlib`` (what VirtualiZarr writes), so each
HDF5 chunk is a Zarr chunk as it lies in the file. The v3 writer's own choice (shuffle + zlib as ``blosc``,
zlib as ``gzip``) would need every chunk re-encoded: no reference. zarr-python and xarray read these codecs
(zarr-python warns that they are outside the v3 spec); TensorStore does not. Everything else (what is
inlined, what is refused, the bound) is :mod:`conversion.references`'s.
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from nczarr_conformance.conversion.from_netcdf import ConvertStats
from nczarr_conformance.conversion.references import INLINE_LIMIT, collect_and_commit
from nczarr_conformance.errors import StoreError, UsageError
from nczarr_conformance.model import Dataset, Variable
from nczarr_conformance.nczarr.writer import ArrayPlan, DatasetWriter, RawSource
from nczarr_conformance.stores.icechunk_store import IcechunkCollector
from nczarr_conformance.urls import parse
from nczarr_conformance.zarr3.writer import V3Plan, V3Writer


class HDF5CodecsV3Writer(V3Writer):
    """The pure Zarr v3 writer with HDF5's filters as ``numcodecs.*`` codecs, chunks copied (referenced) as
    they are, not rewrapped."""

    @staticmethod
    def _rewrapping(raw: RawSource) -> RawSource:
        return raw

    def _plan_array(self, akey: str, var: Variable) -> ArrayPlan:
        plan = super()._plan_array(akey, var)
        if not isinstance(plan, V3Plan) or not var.filters or var.type == "string" or plan.inner is not None:
            return plan
        import numcodecs

        compressor, filters = DatasetWriter._codecs(akey, var, plan.storage.itemsize)
        configs = [*(filters or []), *([compressor] if compressor else [])]
        json_codecs = [{"name": f"numcodecs.{c['id']}", "configuration": {k: v for k, v in c.items() if k != "id"}}
                       for c in configs]
        objects = [numcodecs.get_codec(dict(c)) for c in configs]
        return dataclasses.replace(plan, codecs=[plan.codecs[0], *json_codecs], codec_objects=objects,
                                   compressor=compressor, filters=filters)


def v3_writer(dataset: Dataset, store: Any, **kwargs: Any) -> DatasetWriter:
    """:func:`~nczarr_conformance.conversion.references.collect_file`'s ``make_writer`` for an Icechunk repository:
    :class:`HDF5CodecsV3Writer` (no NCZarr flavor, no char dtype to choose). A module-level function, so a dask
    task of ``--concat --reference`` carries it."""
    kwargs.pop("flavor", None)
    kwargs.pop("char_as", None)
    return HDF5CodecsV3Writer(dataset, store, **kwargs)


def is_icechunk_output(dst: str) -> bool:
    """Whether ``dst`` names an Icechunk repository to write (``icechunk://PATH``)."""
    return dst.startswith("icechunk://")


def convert_icechunk_references(src: str, dst: str, *, overwrite: bool = False, consolidate: bool | None = None,
                                skip_unsupported: bool = False, inline_limit: int = INLINE_LIMIT) -> ConvertStats:
    """A new Icechunk repository at ``dst`` (``icechunk://PATH``) of the Zarr v3 store ``src`` converts to, each
    HDF5 chunk a virtual reference into ``src``: one commit, and nothing at PATH when anything fails."""
    started = time.perf_counter()
    if not os.path.exists(src):
        raise StoreError(f"{src}: no such file or directory")
    path = parse(dst).path
    if os.path.abspath(path) == os.path.abspath(src):
        raise UsageError(f"{dst}: the output would replace its own input")
    collector = IcechunkCollector(path, overwrite=overwrite, inline_limit=inline_limit)
    return collect_and_commit(src, collector, started, flavor="zarr", char_as=None, consolidate=consolidate,
                              skip_unsupported=skip_unsupported, make_writer=v3_writer)
