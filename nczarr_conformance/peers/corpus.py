"""netcdf-c's own test stores and the NCZarr v1 store synthesised from nczarr.md Appendix C: a writer of those
cases only."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from nczarr_conformance.model import Dataset
from nczarr_conformance.peers.base import CannotExpress, Peer
from nczarr_conformance.stores import DirectoryStore


def write_v1_store(target: Path) -> None:
    """The 2020 NCZarr v1 layout, synthesised from nczarr.md Appendix C (separate .nczarr/.nczgroup/
    .nczarray/.nczattr objects): no released netcdf-c writes v1 and netcdf-c's corpus ships no v1 store."""
    objects: dict[str, Any] = {
        "/.nczarr": {"nczarr_version": "1.0.0"}, "/.zgroup": {"zarr_format": 2},
        "/.nczgroup": {"dims": {"x": "3", "y": 2}, "vars": ["v"], "groups": ["g"]},
        "/.zattrs": {"title": "v1", "n": [1, 2]}, "/.nczattr": {"types": {"title": "<U1", "n": "<i2"}},
        "/v/.zarray": {"zarr_format": 2, "shape": [3, 2], "dtype": "<i4", "chunks": [2, 2], "fill_value": -1,
                       "order": "C", "compressor": None, "filters": None},
        "/v/.nczarray": {"dimrefs": ["/x", "/y"], "storage": "chunked"},
        "/g/.zgroup": {"zarr_format": 2}, "/g/.nczgroup": {"dims": {}, "vars": ["s"], "groups": []},
        "/g/s/.zarray": {"zarr_format": 2, "shape": [1], "dtype": "<f8", "chunks": [1], "fill_value": 0,
                         "order": "C", "compressor": None, "filters": None},
        "/g/s/.nczvar": {"dimrefs": [], "storage": "scalar"},
    }
    with DirectoryStore(target, "w") as store:
        for key, doc in objects.items():
            store.put(key, json.dumps(doc).encode())
        store.put("/v/0.0", np.array([[0, 1], [2, 3]], "<i4").tobytes())
        store.put("/g/s/0", np.array([6.5], "<f8").tobytes())


#: case id → the store it copies from nczarr_conformance/corpus/netcdf-c, or "v1" for the store
#: synthesised from nczarr.md Appendix C (write_v1_store); conformance/cases.py holds each case's model
CORPUS_CASES: dict[str, str] = {
    "corpus-ref_byte": "ref_byte.zarr.zip",
    "corpus-ref_byte_fill_value_null": "ref_byte_fill_value_null.zarr.zip",
    "corpus-ref_oldformat": "ref_oldformat.zip",
    "corpus-ref_oldkeys": "ref_oldkeys.file.zip",
    "nczarr-v1": "v1",
}


class Corpus(Peer):
    """Stores as netcdf-c's own tests hold them, and the NCZarr v1 store synthesised from nczarr.md
    Appendix C: a writer only of those cases."""

    id, name, writes = "netcdf-c-corpus", "netcdf-c test corpus (+ NCZarr v1 synthesised from nczarr.md)", True

    def version(self) -> str:
        return "nczarr_test"

    def write(self, dataset: Dataset, target: Path, options: dict[str, str]) -> str:
        raise CannotExpress("the corpus holds only its own stores")

    def copy_case(self, case_id: str, target: Path) -> str:
        from nczarr_conformance.resources import netcdf_c_corpus
        from nczarr_conformance.stores import open_store

        source = CORPUS_CASES[case_id]
        if source == "v1":
            write_v1_store(target)
            return str(target)
        with open_store(str(netcdf_c_corpus() / source)) as src, DirectoryStore(target, "w") as dst:
            for key in src.list_prefix("/"):
                data = src.get(key)
                if data is not None:
                    dst.put(key, data)
        return str(target)

    def read(self, url: str) -> Dataset:
        raise NotImplementedError
