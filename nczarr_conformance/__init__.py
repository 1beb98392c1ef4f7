"""NCZarr (netCDF-in-Zarr) reference reader/writer, converter, validator and conformance suite.

Read a store lazily, convert a netCDF-4 file, write a dataset, check a store::

    import nczarr_conformance as ncz

    ncz.convert("in.nc", "out.zip")              # nc2nczarr in.nc out.zip
    with ncz.open("out.zip") as ds:              # metadata now, chunks on indexing
        print(ds)                                # groups, dimensions, variables
        row = ds["g1/w"][0, ::2]
    ncz.write(xarray_dataset, "s3://bucket/x")   # an xarray.Dataset or DataTree, or our model
    report = ncz.check("out.zip")                # nczarr-check; report.findings, report.exit_code

Every call takes a plain path or a netcdf-c URL (directory, ``.zip``, ``s3://``, ``…#mode=zarr``).
The five commands (``nc2nczarr``, ``nczarr-dump``, ``nczarr-check``, ``nczarr-fix``,
``nczarr-conformance``) also run as ``python -m nczarr_conformance COMMAND ARGS``.
docs/api.md is the reference; docs/commands.md the commands.
"""
# The public names are imported on first use (module ``__getattr__``, PEP 562): the commands import this
# package, and ``nc2nczarr --help`` must not pay for numpy, netCDF4 or h5py. No submodule shares a public
# name, so importing a wing never rebinds ``open``, ``write``, ``convert`` or ``check``.
from __future__ import annotations

TYPE_CHECKING = False  # typing's constant without importing typing: 4 ms of ``nczarr-dump -h``'s start
if TYPE_CHECKING:
    from typing import Any

    from nczarr_conformance.access.api import check, convert, write, write_dataset
    from nczarr_conformance.access.dataset import open_dataset
    from nczarr_conformance.access.lazy import LazyDataset, LazyGroup, LazyVariable, open
    from nczarr_conformance.checker.report import Report
    from nczarr_conformance.checker.rules import Finding
    from nczarr_conformance.conversion.from_netcdf import ConvertStats
    from nczarr_conformance.model import Dataset

del TYPE_CHECKING

__all__ = ["ConvertStats", "Dataset", "Finding", "LazyDataset", "LazyGroup", "LazyVariable", "Report",
           "__version__", "check", "convert", "open", "open_dataset", "write", "write_dataset"]
__version__ = "0.1.0"

_LAZY = {"open": ".access.lazy", "LazyDataset": ".access.lazy", "LazyGroup": ".access.lazy",
         "LazyVariable": ".access.lazy", "write": ".access.api", "convert": ".access.api", "check": ".access.api",
         "open_dataset": ".access.dataset", "Dataset": ".model", "write_dataset": ".access.api",
         "Report": ".checker.report", "Finding": ".checker.rules", "ConvertStats": ".conversion.from_netcdf"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value  # later lookups are plain attribute reads
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names only: not the helpers this module imports, nor the wings loaded so far."""
    return sorted(__all__)
