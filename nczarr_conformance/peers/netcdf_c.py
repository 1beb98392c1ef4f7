"""netcdf-c 4.10 through netCDF4-python (reads and writes), and its output after ``nczarr-fix``."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nczarr_conformance.model import Dataset
from nczarr_conformance.peers import netcdf4 as nc4
from nczarr_conformance.peers.base import Peer, reject_options
from nczarr_conformance.peers.capabilities import ALL
from nczarr_conformance.urls import to_file_url


class NetCDFC410(Peer):
    id, name, reads, writes = "netcdf-c-4.10", "netcdf-c via netCDF4-python", True, True
    #: no released netcdf-c reads Zarr v3 (4.10.1: "Unknown file format"; tests/peers/test_zarr3_peers.py)
    capabilities = ALL - {"zarr-v3"}
    #: its pinned faults (conformance/known.py): what it reads of ours worse than of another writer. The 4.8-4.9.0
    #: layout (ours-nczarr-2-upper) is judged against the writer of that layout, by flavor: netcdf-c 4.9.0's
    #: ncgen where nczarr-conformance.toml declares it (no evidence to check, and none needed, without it)
    known: tuple[Mapping[str, Any], ...] = (
        # netcdf-c 4.10.1 no longer reads the 4.8-4.9.0 layout it wrote itself (<U1 char, upper-case keys)
        {"writer": "ours-nczarr-2-upper", "cases": ["char-var", "typed-attrs"],
         "why": "netcdf-c 4.10.1 mis-reads the 4.8–4.9.0 layout; it reads netcdf-c 4.9.0's output of this case "
                "identically", "evidence": {"kind": "same_as_writer", "flavor": "nczarr-2-upper"}},
        {"writer": "ours-nczarr-2-upper", "cases": ["groups-nested"],
         "why": "netcdf-c 4.10.1 mis-reads the 4.8–4.9.0 layout; it reads netcdf-c 4.9.0's output of this case "
                "with every difference of ours (and _NCZARR_ATTR shown on more objects)",
         "evidence": {"kind": "within_writer", "flavor": "nczarr-2-upper"}},
        # it does not take the 4.8-4.9.0 layout's upper-case _NCZARR_ATTR for its own key and shows it as a user
        # attribute (the matrix's netcdf-c reader keeps the reserved names netcdf-c shows: issue 34), on 4.9.0's
        # own output as on ours; ours writes it only where an object has attributes, so on fewer objects
        {"writer": "ours-nczarr-2-upper",
         "cases": ["fill-partial", "char-attr-json-number", "char-attr-json-object", "char-attr-text"],
         "why": "netcdf-c 4.10.1 shows the 4.8–4.9.0 layout's _NCZARR_ATTR as a user attribute; it shows it on "
                "netcdf-c 4.9.0's output of this case too, with every other difference of ours",
         "evidence": {"kind": "within_writer", "flavor": "nczarr-2-upper"}},
        {"writer": "ours-zarr", "cases": ["char-var"],
         "why": "netcdf-c 4.10.1 reads a pure-Zarr char array's NUL padding as empty strings; it reads zarr-python's "
                "output of this case identically", "evidence": {"kind": "same_as_writer", "writer": "zarr-python"}},
        {"writer": "ours-zarr", "cases": ["scalar"],
         "why": "netcdf-c 4.10.1 does not show Zarr arrays of shape [] (netcdf-c issue #3108); zarr-python's output "
                "of this case is read identically", "evidence": {"kind": "same_as_writer", "writer": "zarr-python"}},
    )

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
    known = ()  # a writer only: netcdf-c 4.10's reading faults are its parent's

    def write(self, dataset: Dataset, target: Path, options: dict[str, str]) -> str:
        from nczarr_conformance.fix import fix_store

        url = super().write(dataset, target, options)
        # not under netCDF4-python's lock: the fix's verification runs netcdf-c in a child process (fix/verify.py)
        fix_store(url, backup=False)
        return url
