"""Predictions about TensorStore and about fill values every reader shows, each cured by an nczarr-fix fix.

Like interop.py, each rule stands on a peer behaviour that tests/check/test_interop.py reproduces by
running the peer (TensorStore's zarr driver; zarr-python for the rounded fill).
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from nczarr_conformance import keys
from nczarr_conformance.checker.context import CheckContext, parse_array
from nczarr_conformance.checker.rules import Finding, Severity, get, rule
from nczarr_conformance.nczarr.dtypes import DEFAULT_FILL


@rule("NCZ-INTEROP-TS-FILTERS", Severity.WARNING, source="TensorStore zarr driver; tests/check/test_interop.py")
def ts_filters(ctx: CheckContext) -> Iterator[Finding]:
    """TensorStore's zarr driver refuses every array with filters (netcdf-c's shuffle): "filters are not supported"."""
    for akey, rec in sorted(ctx.arrays.items()):
        if (rec.zarray or {}).get("filters"):
            yield get("NCZ-INTEROP-TS-FILTERS").finding(keys.join(akey, ".zarray"),
                                                        "TensorStore cannot open this array: it has filters")


@rule("NCZ-INTEROP-TS-STRINGFILL", Severity.WARNING, source="TensorStore zarr driver; tests/check/test_interop.py")
def ts_string_fill(ctx: CheckContext) -> Iterator[Finding]:
    """TensorStore refuses a char or string array whose fill_value is "" (netcdf-c's): it wants base64 bytes or null."""
    for akey, rec in sorted(ctx.arrays.items()):
        z = rec.zarray or {}
        dtype = z.get("dtype")
        if isinstance(dtype, str) and dtype[1:2] == "S" and z.get("fill_value") == "":
            yield get("NCZ-INTEROP-TS-STRINGFILL").finding(keys.join(akey, ".zarray"),
                                                           'TensorStore cannot open this array: fill_value ""')


@rule("NCZ-FILL-ROUNDED", Severity.WARNING, source="netcdf-c 4.10.1 writes %g; Zarr v2 spec \"fill_value\"")
def fill_rounded(ctx: CheckContext) -> Iterator[Finding]:
    """A float fill_value is netCDF's default fill rounded by %g (9.96921e+36): every reader fills unwritten cells
    with that, which no netCDF reader then takes for the fill."""
    for akey, rec in sorted(ctx.arrays.items()):
        storage = parse_array(ctx, rec).storage
        fill = (rec.zarray or {}).get("fill_value")
        if storage is None or storage.nctype not in ("float", "double") or "_FillValue" in rec.zattrs:
            continue
        if isinstance(fill, bool) or not isinstance(fill, (int, float)):
            continue
        exact = DEFAULT_FILL[storage.nctype]
        assert isinstance(exact, float)
        held = np.array(fill).astype(storage.numpy)
        rounded = np.array(float(f"{exact:g}")).astype(storage.numpy)
        if held == rounded and held != np.array(exact).astype(storage.numpy):
            yield get("NCZ-FILL-ROUNDED").finding(keys.join(akey, ".zarray"),
                                                  f"fill_value {fill!r} is the default fill {exact!r} rounded")
