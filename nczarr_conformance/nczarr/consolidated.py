"""Zarr v2 consolidated metadata (``.zmetadata``), as zarr-python's ``consolidate_metadata`` writes it.

One object holding every ``.zgroup``, ``.zarray`` and ``.zattrs`` of the dataset: xarray opens
it without a warning and a reader over S3 needs one GET instead of two per node. netcdf-c 4.10.1
ignores it unless asked, so it must always equal the objects it summarises (``nczarr-check``
rule ``NCZ-CONSOLIDATED-MATCH``): writers put it after every other metadata object, and an
append rewrites it with the objects it changed.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

CONSOLIDATED_KEY = "/.zmetadata"
_NOT_FINITE = ("NaN", "Infinity", "-Infinity")
_FLOAT_DTYPE = re.compile(r"^[<>|]?f\d+$")


def refused_by_zarr_python(dtype: Any, fill_json: Any, *, fill_is_text: bool) -> bool:
    """Whether zarr-python 3 refuses this array's ``.zarray``, so that a ``.zmetadata`` holding it
    makes it refuse the whole group (without one it reads every other array).

    The writer leaves ``.zmetadata`` out for such a store and nczarr-fix writes none into one:

    * a ``>S1`` dtype (netcdf-c's char, Appendix E): no zarr-python data type matches it;
    * a bytes fill written as text (``fill_is_text``: a netCDF string variable's fill as netcdf-c
      writes and reads it), where Zarr v2 wants base64;
    * a fill NaN or ±Infinity (bare JSON, which other writers leave, or spelled) on a dtype
      that is not floating point: "Invalid type: nan. Expected an integer."
    """
    if dtype == ">S1" or (fill_is_text and bool(fill_json)):
        return True
    not_finite = (fill_json in _NOT_FINITE) if isinstance(fill_json, str) else (
        isinstance(fill_json, float) and not math.isfinite(fill_json))
    return not_finite and not (isinstance(dtype, str) and _FLOAT_DTYPE.match(dtype) is not None)


def consolidated_bytes(objects: Mapping[str, Any]) -> bytes:
    """The ``.zmetadata`` for ``objects`` (zmap key of a ``.zgroup``, ``.zarray`` or ``.zattrs`` → its parsed
    JSON); keys are stored without the leading ``/``, as zarr-python writes them, in key order.

    Only the entry keys are sorted: each entry keeps its object's key order, because a ``.zattrs``
    lists the attributes in creation order (the order ``ncdump`` prints) and a reader that takes its
    metadata from ``.zmetadata`` (ours, by default) must see that order, not the alphabet's.
    """
    meta = {key.lstrip("/"): objects[key] for key in sorted(objects, key=lambda k: k.lstrip("/"))}
    return json.dumps({"metadata": meta, "zarr_consolidated_format": 1}, ensure_ascii=False, allow_nan=False,
                      indent=4).encode("utf-8")


def with_updates(raw: bytes, updated: Mapping[str, bytes]) -> bytes:
    """An existing ``.zmetadata`` with the objects in ``updated`` (zmap key → stored bytes) replaced."""
    doc = json.loads(raw)
    meta = {f"/{key}": value for key, value in dict(doc.get("metadata") or {}).items()}
    for key, value in updated.items():
        meta[key] = json.loads(value)
    return consolidated_bytes(meta)
