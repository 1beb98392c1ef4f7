"""netcdf-c 4.10 through netCDF4-python (reads and writes), and its output after ``nczarr-fix``."""
from __future__ import annotations

from pathlib import Path

from nczarr_conformance.model import (
    Dataset,
)
from nczarr_conformance.peers import netcdf4 as nc4
from nczarr_conformance.peers.base import Peer, reject_options
from nczarr_conformance.peers.capabilities import ALL
from nczarr_conformance.urls import to_file_url


class NetCDFC410(Peer):
    id, name, reads, writes = "netcdf-c-4.10", "netcdf-c via netCDF4-python", True, True
    #: no released netcdf-c reads Zarr v3 (4.10.1: "Unknown file format"; tests/peers/test_zarr3_peers.py)
    capabilities = ALL - {"zarr-v3"}

    def available(self) -> str | None:
        return None if nc4.available() else "netCDF4-python not installed"

    def version(self) -> str:
        import netCDF4

        return str(netCDF4.__netcdf4libversion__)

    def write(self, dataset: Dataset, target: Path, options: dict[str, str]) -> str:
        reject_options(options, self.id)
        nc4.write(dataset, to_file_url(str(target), "file"))
        return str(target)

    def read(self, url: str) -> Dataset:
        """What netcdf-c shows, a reserved ``_nczarr*`` name it shows as a user attribute included: no model
        holds one, so the matrix's comparison reports such a leak as a difference (issue 34)."""
        with nc4.LOCK:  # netcdf-c is not thread-safe: open and close too (the matrix runs cells in threads)
            return nc4.read(url if "#" in url else to_file_url(url, "zip" if url.endswith(".zip") else "file"),
                            shown_reserved=True)


class NetCDFC410Fixed(NetCDFC410):
    """netcdf-c 4.10.1's output after ``nczarr-fix`` (in place, every reader): the store users have today, repaired."""

    id, name, reads = "netcdf-c-4.10+nczarr-fix", "netcdf-c via netCDF4-python, then nczarr-fix", False

    def write(self, dataset: Dataset, target: Path, options: dict[str, str]) -> str:
        from nczarr_conformance.fix import fix_store

        url = super().write(dataset, target, options)
        # not under netCDF4-python's lock: the fix's verification runs netcdf-c in a child process (fix/verify.py)
        fix_store(url, backup=False)
        return url
