"""Zarr v3 (issue #25, first slice): nczarr-check reads a v3 store and says what it found.

The v2 rule families do not apply to a v3 store (their objects are not there); a v3 store is
checked by these rules alone: it reads with our reader (every variable's data with ``--deep``),
and the interop prediction that no released netcdf-c reads it; checker/v3.py's rules check its metadata
schema, codec chains, shard indexes (``--deep``) and consolidated metadata.
"""
from __future__ import annotations

from collections.abc import Iterator

from nczarr_conformance import keys
from nczarr_conformance.checker.context import CheckContext
from nczarr_conformance.checker.rules import Finding, Severity, get, rule
from nczarr_conformance.errors import NczarrError, StoreUnavailableError
from nczarr_conformance.zarr3.draft import open_v3
from nczarr_conformance.zarr3.metadata import FLAVOR

#: the rules a Zarr v3 store is checked by (nczarr-check runs only these on one)
V3_RULES = ("NCZ-V3-READ", "NCZ-V3-SCHEMA", "NCZ-V3-CODECS", "NCZ-V3-SHARD", "NCZ-V3-CONSOLIDATED",
            "NCZ-V3-INTEROP-NETCDFC", "NCZ-V3-INTEROP-GDAL", "NCZ-V3-INTEROP-TS-TEXT", "NCZ-ATTR-NAME-EMPTY")


@rule("NCZ-V3-READ", Severity.ERROR, source="Zarr v3 core spec; zarr-python 3.1 (tests/zarr3/)")
def v3_reads(ctx: CheckContext) -> Iterator[Finding]:
    """A Zarr v3 store reads: its metadata (and with --deep every variable's data) decode within bounds."""
    if ctx.flavor != FLAVOR:
        return
    try:
        reader = open_v3(ctx.store)  # the draft NCZarr v3 layout read as such
        if ctx.deep:
            for gkey, group in reader.dataset.root.walk():
                for name in group.variables:
                    for _ in reader.iter_chunks(keys.join(gkey, name)):
                        pass
    except StoreUnavailableError:
        raise
    except NczarrError as exc:
        yield get("NCZ-V3-READ").finding(None, str(exc))


@rule("NCZ-V3-INTEROP-NETCDFC", Severity.WARNING,
      source="netcdf-c 4.10.1 nc_open: 'Unknown file format'; ncdump 4.9.0 prints an empty dataset (issue #25)")
def v3_netcdf_c(ctx: CheckContext) -> Iterator[Finding]:
    """No released netcdf-c (4.10.1 and older) reads Zarr v3: ncdump, nccopy and netCDF4-python cannot open it."""
    if ctx.flavor == FLAVOR:
        yield get("NCZ-V3-INTEROP-NETCDFC").finding(
            "/zarr.json", "no released netcdf-c reads Zarr v3 (4.10.1: 'Unknown file format'; 4.9.0's ncdump "
            "prints an empty dataset): netCDF tools will not read this store")
