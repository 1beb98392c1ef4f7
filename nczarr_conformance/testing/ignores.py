"""Storage fields a comparison cannot hold to account, each with the reason (for ``model.diff(ignore=...)``).

A comparison includes storage by default; a test that looks past a field says which
and why by passing one of these (or its own reason), so no storage is ignored silently.
"""
from __future__ import annotations

from nczarr_conformance.model import STORAGE_FIELDS

#: Zarr has no contiguous layout: a Zarr writer (ours, netcdf-c's) stores a contiguous netCDF
#: variable in chunks of its own choosing; chunked variables still compare their chunk shape.
CONTIGUOUS = {"contiguous": "Zarr has no contiguous layout: a Zarr writer chooses chunks for a contiguous variable"}

#: what the nczarr-2-upper writer changes on purpose (nczarr/writer.py): netcdf-c 4.9.0 ignores the
#: byte order on read and has no codecs, so it writes little-endian, uncompressed chunks.
UPPER_FLAVOR = {
    "endianness": "nczarr-2-upper writes little-endian: netcdf-c 4.9.0 ignores the byte order on read",
    "filters": "nczarr-2-upper writes uncompressed chunks: Debian's netcdf-c 4.9.0 has no NCZarr codecs",
}

#: a CDL baseline printed by ncdump without -s states no storage, and ncgen lays out the file
#: built from it as it likes: only the content compares.
CDL_STATES_NO_STORAGE = {field: "the CDL baseline (ncdump without -s) states no storage; ncgen chooses its own"
                         for field in sorted(STORAGE_FIELDS)}
