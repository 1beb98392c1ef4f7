"""Our own reader and writer as peers, one per flavor written (and the pure-Zarr v3 writer)."""
from __future__ import annotations

from pathlib import Path

from nczarr_conformance import __version__
from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.errors import UnsupportedError
from nczarr_conformance.model import Dataset
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.peers.base import CannotExpress, Peer, reject_options
from nczarr_conformance.peers.capabilities import ALL, PURE_ZARR, PURE_ZARR_V3
from nczarr_conformance.peers.common import writes_v3
from nczarr_conformance.stores import DirectoryStore


class Ours(Peer):
    reads = writes = True
    flavor: str  # always one of ours

    def __init__(self, flavor: str, peer_id: str, zarr_format: int = 2) -> None:
        self.flavor = flavor
        self.id = peer_id
        self.name = f"nczarr_conformance ({flavor}{', Zarr v3' if zarr_format == 3 else ''})"
        # the 4.8-4.9.0 layout predates Appendices D and E; the pure-Zarr flavor still writes netCDF's fills
        # (in v3 too, but rule Z.fill reads v2's .zarray: the v3 writer claims no v2 convention)
        self.capabilities = PURE_ZARR_V3 if zarr_format == 3 else {
            "zarr": PURE_ZARR | {"netcdf-fill"}, "nczarr-2-upper": ALL - {"appendix-d"}}.get(flavor, ALL)
        self.reads = flavor == "nczarr-4.10" and zarr_format == 2
        if self.reads:  # our reader opens kerchunk references and Icechunk repositories too (stores/)
            self.capabilities = self.capabilities | {"references", "icechunk"}

    def version(self) -> str:
        return __version__

    def write(self, dataset: Dataset, target: Path, options: dict[str, str]) -> str:
        if writes_v3(self) and options.get("separator") == "/":  # v3's default key encoding: c/0/0
            options = {k: v for k, v in options.items() if k != "separator"}
        reject_options(options, self.id)
        try:
            with DirectoryStore(target, "w") as store:
                if writes_v3(self):
                    from nczarr_conformance.zarr3.writer import write_dataset as write_v3

                    write_v3(dataset, store, flavor=self.flavor)
                else:
                    write_dataset(dataset, store, flavor=self.flavor)
        except UnsupportedError as exc:
            raise CannotExpress(str(exc)) from exc
        return str(target)

    def read(self, url: str) -> Dataset:
        return open_dataset(url)
