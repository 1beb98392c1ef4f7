"""The built-in peers, in the order the matrix runs them: one module per implementation graded from this
package (ids per docs/contracts/interop-report.md), registered here once each. ``register`` refuses an id
twice, naming the module of each (peers/base.py). The implementations nobody here wrote join through
command adapters declared in nczarr-conformance.toml (peers/command.py, adapters/), their pinned faults
declared beside them."""
from __future__ import annotations

from nczarr_conformance.peers.base import Peer, register
from nczarr_conformance.peers.corpus import Corpus
from nczarr_conformance.peers.gdal_peer import Gdal
from nczarr_conformance.peers.nczarr_engine import NczarrEngine
from nczarr_conformance.peers.netcdf_c import NetCDFC410, NetCDFC410Fixed
from nczarr_conformance.peers.ours import Ours
from nczarr_conformance.peers.ours_references import OursIcechunkReferences, OursReferences
from nczarr_conformance.peers.tensorstore_peer import TensorStore, TensorStoreV3
from nczarr_conformance.peers.xarray_datatree import XarrayDatatree
from nczarr_conformance.peers.xarray_peer import Xarray, XarrayV3
from nczarr_conformance.peers.zarr_python import ZarrPython, ZarrPythonV3

#: every built-in peer, in the matrix's order (the reports' columns and rows follow it)
BUILT_IN: tuple[Peer, ...] = (
    Ours("nczarr-4.10", "ours"), Ours("nczarr-2", "ours-nczarr-2"), Ours("nczarr-2-upper", "ours-nczarr-2-upper"),
    Ours("zarr", "ours-zarr"), Ours("zarr", "ours-zarr-v3", zarr_format=3), OursReferences(), OursIcechunkReferences(),
    NetCDFC410(), NetCDFC410Fixed(),
    ZarrPython(), ZarrPythonV3(), Xarray(), XarrayV3(), XarrayDatatree(), NczarrEngine(), Gdal(), TensorStore(),
    TensorStoreV3(), Corpus())

for _peer in BUILT_IN:
    register(_peer)
