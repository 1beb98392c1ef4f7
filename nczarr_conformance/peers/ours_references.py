"""Our reference writers as writers of the matrix: ``nc2nczarr IN.nc OUT.json --reference`` and
``nc2nczarr IN.nc icechunk://OUT --reference``."""
from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

from nczarr_conformance import __version__
from nczarr_conformance.errors import UnsupportedError
from nczarr_conformance.model import Dataset
from nczarr_conformance.peers import netcdf4 as nc4
from nczarr_conformance.peers.base import CannotExpress, Peer, reject_options
from nczarr_conformance.peers.capabilities import ALL, PURE_ZARR_V3

#: one case at a time in this process, whichever of our reference writers and matrix threads runs it: each writes
#: and reads a netCDF-4 file through netCDF4-python, whose netcdf-c is not thread-safe. Its calls are serialized
#: (peers/netcdf4.LOCK) but not its objects' lifetimes: a dataset closed on one matrix thread while another's
#: conversion read values crashed the interpreter (SIGSEGV in nc.close, a CI run of 2026-12-06)
_ONE_CASE = threading.Lock()


class OursReferences(Peer):
    """``nc2nczarr IN.nc OUT.json --reference``: the case written as a netCDF-4 file by netCDF4-python (as every
    reference writer of nczarr-conformance.toml gets it), then our NCZarr store of it as kerchunk JSON, every
    chunk a byte range of that file (conversion/references.py)."""

    id, name, writes = "ours-references", "nczarr_conformance (nc2nczarr --reference, kerchunk JSON)", True
    capabilities = ALL | {"references", "writes-references"}

    def available(self) -> str | None:
        """netCDF4-python writes the case's file; reading the references needs fsspec, which a plain install
        lacks (the ``[references]`` extra): a missing tool, not a failure of ours."""
        if not nc4.available():
            return "netCDF4-python not installed"
        return None if importlib.util.find_spec("fsspec") else "fsspec not installed (the [references] extra)"

    def version(self) -> str:
        return __version__

    suffix = ".json"

    def convert(self, source: str, out: Path) -> None:
        """References of the netCDF-4 file ``source`` written to ``out``."""
        from nczarr_conformance.conversion.references import convert_references

        convert_references(source, str(out))

    def write(self, dataset: Dataset, target: Path, options: dict[str, str]) -> str:
        reject_options(options, self.id)
        target.mkdir(parents=True)
        source, out = target / "case.nc", target.parent / f"{target.name}{self.suffix}"
        with _ONE_CASE:
            nc4.write(dataset, str(source))
            try:
                self.convert(str(source), out)
            except UnsupportedError as exc:
                raise CannotExpress(str(exc)) from exc
        return str(out)

    def read(self, url: str) -> Dataset:
        raise NotImplementedError("ours-references writes only")


class OursIcechunkReferences(OursReferences):
    """``nc2nczarr IN.nc icechunk://OUT --reference``: the case's netCDF-4 file (as :class:`OursReferences` gets
    it), then a new Icechunk repository of our Zarr v3 store of it, every chunk a virtual reference into that file
    (conversion/icechunk_references.py). Pure Zarr v3: no NCZarr convention."""

    id, name = "ours-icechunk", "nczarr_conformance (nc2nczarr icechunk:// --reference)"
    capabilities = PURE_ZARR_V3 | {"icechunk", "writes-icechunk"}

    suffix = ".icechunk"

    def convert(self, source: str, out: Path) -> None:
        from nczarr_conformance.conversion.icechunk_references import convert_icechunk_references

        convert_icechunk_references(source, f"icechunk://{out}")

    def read(self, url: str) -> Dataset:
        raise NotImplementedError("ours-icechunk writes only")
