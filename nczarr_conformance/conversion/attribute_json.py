"""What an attribute is stored as in Zarr v3 JSON, and which attributes xarray's ``to_zarr`` adds on its own.

Shared by both appends (``append.py`` compares a v2 store's attributes with these rules too, ``append_v3.py``
a v3 store's): a module below both, so neither imports the other for them.
"""
from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from nczarr_conformance.model import Attribute, is_internal_attribute
from nczarr_conformance.nczarr import attrs as attr_codec
from nczarr_conformance.sources import netcdf4 as nc4
from nczarr_conformance.zarr3.v3_writer import _fill_attribute


def _written_attributes(attributes: dict[str, Attribute], nctype: str | None) -> dict[str, Any]:
    """The JSON values a v3 writer stores for these attributes (``_FillValue`` as xarray encodes it)."""
    out: dict[str, Any] = {}
    for name, attr in attributes.items():
        if is_internal_attribute(name):
            continue
        if name == "_FillValue" and nctype is not None:
            out[name] = _fill_attribute(nctype, attr)
        else:
            out[name] = attr_codec.encode(attr, json_convention=False)[0]
    return json.loads(json.dumps(out, allow_nan=True))  # type: ignore[no-any-return]


def _same_json(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, allow_nan=True) == json.dumps(b, sort_keys=True, allow_nan=True)


#: CF time units ("days since 2000-01-01"): what xarray decodes to dates and writes back with a calendar
_TIME_UNITS = re.compile(r"^\s*[A-Za-z]+\s+since\s+\S")


def _xarray_encoding_added(stored: dict[str, Any], written: dict[str, Any], nctype: str,
                           variable: Any) -> dict[str, Any]:
    """``stored`` less the two attributes xarray's ``to_zarr`` adds to a variable that had neither,
    when they change nothing the appended values mean:

    * ``_FillValue`` NaN on a float variable with no ``_FillValue`` (xarray's default encoding of
      floats): NaN reads as missing either way, and the file's other values are written as they are,
      as xarray's own append writes them;
    * ``calendar: proleptic_gregorian`` on a variable with CF time units and no ``calendar`` (CF's
      default is ``standard``): xarray writes that name for dates it decoded to numpy datetime64,
      and the two calendars are the same day for day from 1582-10-15 on, which the new values are
      checked to be (decoded by cftime in ``standard``); an earlier date keeps the difference.
    """
    out = dict(stored)
    if "_FillValue" not in written and nctype in ("float", "double") and "_FillValue" in out \
            and out["_FillValue"] == _fill_attribute(nctype, Attribute(nctype, np.array([np.nan]))):
        del out["_FillValue"]
    units = written.get("units")
    if "calendar" not in written and out.get("calendar") == "proleptic_gregorian" and isinstance(units, str) \
            and _TIME_UNITS.match(units) and variable is not None and _from_gregorian_reform(variable, units):
        del out["calendar"]
    return out


def _from_gregorian_reform(variable: Any, units: str) -> bool:
    """Whether every value of the netCDF variable is a date on or after 1582-10-15 in the ``standard`` calendar."""
    import cftime

    values = np.asarray(nc4.read_values(variable), dtype="f8").ravel()
    values = values[np.isfinite(values)]
    if values.size == 0:
        return True
    try:
        reform = cftime.date2num(cftime.datetime(1582, 10, 15, calendar="standard"), units, calendar="standard")
    except ValueError:
        return False
    return bool(values.min() >= reform)
