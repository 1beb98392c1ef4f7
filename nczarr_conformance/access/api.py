"""The package's top-level calls, each taking paths or netcdf-c URLs (docs/api.md).

``write`` takes our model Dataset or an ``xarray.Dataset``; ``convert`` and ``check`` are
the library calls behind ``nc2nczarr`` and ``nczarr-check``; ``open`` (lazy.py) reads.
They exist so a user never builds a Store: the URL names it, as on the command line.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from nczarr_conformance.errors import UsageError
from nczarr_conformance.flavor_names import FLAVOR_ALIASES, shard_refusal
from nczarr_conformance.model import Dataset
from nczarr_conformance.stores import open_store
from nczarr_conformance.stores.base import Store
from nczarr_conformance.stores.zip import ZipStore
from nczarr_conformance.urls import parse

if TYPE_CHECKING:
    from nczarr_conformance.checker.report import Report
    from nczarr_conformance.checker.rules import Severity
    from nczarr_conformance.conversion.audience import Audience
    from nczarr_conformance.conversion.from_netcdf import ConvertStats
    from nczarr_conformance.conversion.transforms import Transforms
    from nczarr_conformance.nczarr.writer import Progress

__all__ = ["check", "convert", "write", "write_dataset"]

PathOrURL = str | os.PathLike[str]


def _xarray_kind(obj: object) -> str | None:
    """``"Dataset"`` or ``"DataTree"`` for xarray's, without importing xarray when the caller never did."""
    import sys

    xr = sys.modules.get("xarray")
    if xr is None:
        return None
    if isinstance(obj, xr.Dataset):
        return "Dataset"
    tree = getattr(xr, "DataTree", None)
    return "DataTree" if tree is not None and isinstance(obj, tree) else None


def write(dataset: Any, url: PathOrURL, *, flavor: str | None = None, overwrite: bool = False,
          storage_options: Mapping[str, Any] | None = None, zarr_format: int | None = None, shard: int | None = None,
          for_readers: list[str] | None = None, prefer: list[str] | None = None,
          transforms: Transforms | None = None, skip_unsupported: bool = False, consolidate: bool | None = None,
          char_as: str | None = None, direct: bool = True, threads: int = 0, progress: Progress | None = None,
          choices: Mapping[str, object] | None = None) -> None:
    """Write ``dataset`` (our model :class:`~nczarr_conformance.model.Dataset`, an ``xarray.Dataset`` or an
    ``xarray.DataTree``) to the store ``url`` names (directory, ``.zip``, ``s3://``; a netcdf-c URL or a plain path).

    The store appears whole or not at all (written aside, then committed). An
    ``xarray.Dataset`` is encoded by xarray exactly as ``to_netcdf(engine="netcdf4")``
    encodes it (CF attributes, ``_FillValue``, time units, its ``encoding`` such as
    ``chunksizes`` and ``zlib``): it is written to a temporary netCDF-4 file, then converted
    by :func:`convert`, so the store holds what that netCDF file holds. An ``xarray.DataTree`` goes the
    same way, every node a netCDF-4 group (``DataTree.to_netcdf``).
    ``storage_options`` go to the store's client (for s3://: ``endpoint_url``, ``region_name``, ``profile``).
    ``zarr_format=3`` writes Zarr v3 (``flavor`` ``zarr``, the default there; ``shard`` N chunks per shard);
    what that layout does not keep is one ``UserWarning``. ``for_readers`` (reader ids: ``["xarray",
    "netcdf-c-4.10"]``) writes the layout those readers read, as ``nc2nczarr --for`` (``prefer``: whose needs win a
    conflict); what a named reader still loses is one ``UserWarning`` each, before anything is written.
    ``transforms``, ``skip_unsupported``, ``consolidate``, ``char_as``, ``direct``, ``threads``, ``progress`` and
    ``choices`` are :func:`convert`'s, for an xarray input only (a model Dataset refuses them).
    """
    target = os.fspath(url)
    kind = _xarray_kind(dataset)
    if kind is not None:
        with tempfile.TemporaryDirectory(prefix="nczarr-write-") as tmp:
            nc = os.path.join(tmp, "dataset.nc")
            from nczarr_conformance.sources.netcdf4 import LOCK

            with LOCK:  # xarray's netcdf4 engine locks its own calls, not against ours: netcdf-c is not thread-safe
                dataset.to_netcdf(nc, engine="netcdf4", **({"format": "NETCDF4"} if kind == "Dataset" else {}))
            convert(nc, target, flavor=flavor, overwrite=overwrite, storage_options=storage_options,
                    zarr_format=zarr_format, shard=shard, for_readers=for_readers, prefer=prefer,
                    announce=_warn_losses, transforms=transforms, skip_unsupported=skip_unsupported,
                    consolidate=consolidate, char_as=char_as, direct=direct, threads=threads, progress=progress,
                    choices=choices)
        return
    if not isinstance(dataset, Dataset):
        raise UsageError(f"write() takes a nczarr_conformance Dataset, an xarray.Dataset or an xarray.DataTree, "
                         f"not {type(dataset).__name__}")
    given = {"transforms": transforms is not None, "skip_unsupported": skip_unsupported,
             "consolidate": consolidate is not None, "char_as": char_as is not None, "direct": not direct,
             "threads": threads != 0, "progress": progress is not None, "choices": choices is not None}
    refused = sorted(name for name, set_ in given.items() if set_)
    if refused:
        raise UsageError(f"write() of a model Dataset takes no {', '.join(refused)}")
    spec = parse(target, storage_options)
    char_as = None  # refused above when given: the model path chooses it only for for_readers
    top, default_fill = False, True
    if for_readers:
        dataset, zarr_format, flavor, char_as, top, default_fill = _for_readers(
            dataset, spec.kind, for_readers, prefer, flavor, zarr_format, shard)
    zarr_format = zarr_format or 2
    if zarr_format == 3:
        _write_v3(dataset, spec, flavor or "zarr", overwrite, shard)
        return
    if zarr_format != 2:
        raise UsageError(f"zarr_format {zarr_format!r}: 2, or 3 (which alone takes shard)")
    no_shards = shard_refusal(zarr_format, shard)
    if no_shards is not None:
        raise UsageError(no_shards)
    flavor = flavor or "nczarr"
    if flavor not in FLAVOR_ALIASES:
        raise UsageError(f"unknown flavor {flavor!r} (one of {', '.join(sorted(FLAVOR_ALIASES))})")
    from nczarr_conformance.nczarr.writer import write_dataset

    layout = FLAVOR_ALIASES[flavor]
    if spec.pure_zarr and layout == "nczarr-4.10":  # mode=zarr in the URL asks for pure Zarr, as nc2nczarr
        layout = "zarr"
    with open_store(spec, "w", overwrite=overwrite) as store:  # commits on success, aborts on any error
        if top and isinstance(store, ZipStore):
            store.entries_at_top()
        write_dataset(dataset, store, flavor=layout, xarray=spec.xarray, char_as=char_as, default_fill=default_fill)


def _warn_losses(audience: Audience) -> None:
    """What a named reader still loses, one UserWarning each (the API's form of nc2nczarr's lines)."""
    import warnings

    if audience.plan is not None:
        for loss in audience.plan.losses:
            warnings.warn(f"{loss.reader} loses: {loss.need.loses}", UserWarning, stacklevel=4)


def _for_readers(dataset: Dataset, kind: str, readers: list[str], prefer: list[str] | None, flavor: str | None,
                 zarr_format: int | None, shard: int | None
                 ) -> tuple[Dataset, int, str | None, str | None, bool, bool]:
    """The model and the layout choices (Zarr format, flavor, char dtype, the zip's top, the default fill)
    ``readers`` read."""
    import copy

    from nczarr_conformance.conversion.audience import decide, strip_codecs
    from nczarr_conformance.reader_needs import parse_readers

    try:
        named = parse_readers(",".join(readers), where="for_readers")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    fixed: dict[str, object] = {}
    if flavor is not None:
        fixed["flavor"] = FLAVOR_ALIASES.get(flavor, flavor)
    if zarr_format is not None or shard is not None or flavor is not None:
        fixed["zarr_format"] = zarr_format or (3 if shard is not None else 2)
    audience, choice = decide(dataset, kind, named, prefer or (), fixed)
    _warn_losses(audience)
    dataset = copy.deepcopy(dataset)
    strip_codecs(dataset, choice)
    v3 = choice.get("zarr_format") == 3
    chosen_flavor = flavor if v3 else str(choice.get("flavor", "nczarr-4.10"))
    takes_char_as = not v3 and chosen_flavor in ("nczarr-4.10", "nczarr-2", "zarr")
    return (dataset, 3 if v3 else 2, chosen_flavor, str(choice.get("char_as", ">S1")) if takes_char_as else None,
            choice.get("zip_entries") == "top", choice.get("default_fill") != "null")


def _write_v3(dataset: Dataset, spec: Any, flavor: str, overwrite: bool, shard: int | None) -> None:
    """A model Dataset written as Zarr v3 (zarr3/writer.py); what the layout does not keep, one warning."""
    import warnings

    from nczarr_conformance.zarr3.writer import write_dataset as write_v3

    with open_store(spec, "w", overwrite=overwrite) as store:
        _, notes = write_v3(dataset, store, flavor=flavor, shard=shard)
    for note in notes:
        warnings.warn(note, UserWarning, stacklevel=3)


def write_dataset(dataset: Dataset, target: Store | PathOrURL, **options: Any) -> int:
    """``nczarr.writer.write_dataset`` into an open Store (the caller commits), or :func:`write` to a
    path or URL (committed here); the package exports this one, so a path no longer fails on a
    missing ``put``. Returns the chunks copied as stored (0 for a path or URL)."""
    if isinstance(target, Store):
        from nczarr_conformance.nczarr.writer import write_dataset as into_store

        return into_store(dataset, target, **options)
    write(dataset, target, **options)
    return 0


def convert(src: PathOrURL, url: PathOrURL, *, flavor: str | None = None, overwrite: bool = False,
            storage_options: Mapping[str, Any] | None = None, zarr_format: int | None = None,
            shard: int | None = None, for_readers: list[str] | None = None, prefer: list[str] | None = None,
            transforms: Transforms | None = None, skip_unsupported: bool = False, consolidate: bool | None = None,
            char_as: str | None = None, direct: bool = True, threads: int = 0, progress: Progress | None = None,
            announce: Callable[[Audience], None] | None = None,
            choices: Mapping[str, object] | None = None) -> ConvertStats:
    """Convert the netCDF file ``src`` into the store ``url`` (``nc2nczarr SRC URL``); returns its statistics.

    ``flavor`` (``nczarr``, ``nczarr-2``, ``zarr`` …; nc2nczarr's ``--flavor``) and ``zarr_format`` 3
    (``shard`` N chunks per shard) choose the layout; ``overwrite`` replaces an existing store;
    ``storage_options`` go to the store's client. ``for_readers`` (reader ids) writes the layout those readers
    read, ``prefer`` naming whose needs win a conflict; ``announce`` is handed who reads the result before anything
    is written; ``choices`` fixes layout choices (``{"filters": "none"}``). ``transforms`` are nccopy's ``-d -s -c
    -u -V -G`` (conversion/transforms.py); ``skip_unsupported`` leaves out what NCZarr cannot hold, with a warning
    each; ``consolidate`` writes ``.zmetadata``; ``char_as`` (``"S1"``, ``">S1"``) the char dtype; ``direct``
    copies compressed HDF5 chunks as they are; ``threads`` (0: 2 per core); ``progress`` is called as chunks are
    written. :func:`nczarr_conformance.conversion.from_netcdf.convert` has the details of each.
    """
    from nczarr_conformance.conversion.from_netcdf import convert as run

    return run(os.fspath(src), os.fspath(url), flavor=flavor, overwrite=overwrite, progress=progress, direct=direct,
               threads=threads, transforms=transforms, skip_unsupported=skip_unsupported, consolidate=consolidate,
               char_as=char_as, storage_options=storage_options, zarr_format=zarr_format, shard=shard,
               for_readers=for_readers, prefer=prefer, announce=announce, choices=choices)


def check(url: PathOrURL, *, deep: bool = False, expect: str | None = None, select: list[str] | None = None,
          ignore: list[str] | None = None, fail_on: Severity | str = "error",
          for_readers: list[str] | None = None) -> Report:
    """Run nczarr-check's rules on the store ``url``; the report's ``findings`` and ``exit_code``
    are what ``nczarr-check`` prints and returns (``for_readers``: only the predictions about those readers)."""
    from nczarr_conformance.checker import check as run
    from nczarr_conformance.checker.rules import Severity as Level

    return run(os.fspath(url), deep=deep, expect=expect, select=select, ignore=ignore, fail_on=Level(fail_on),
               for_readers=for_readers)
