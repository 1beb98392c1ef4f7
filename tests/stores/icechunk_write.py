#!/usr/bin/env python3
"""Write an Icechunk repository of virtual chunks into a netCDF-4 file as a user does, with VirtualiZarr and
icechunk themselves (run by VirtualiZarr's own venv, Python >= 3.12; nothing of nczarr_conformance): the
expected side of tests/stores/test_icechunk.py.

Usage: ``icechunk_write.py SOURCE.nc REPO [SPEC_VERSION]``. The repository (spec version 1 unless told,
what icechunk 1.x reads) gets two commits on ``main``: VirtualiZarr's ``vz.to_icechunk`` of the file, then
the global attribute ``title`` set to ``second``. Prints ``{"first": ID, "second": ID}``, the snapshots.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    import icechunk
    import virtualizarr
    import zarr
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr.parsers import HDFParser

    source, repo_dir = Path(argv[1]).resolve(), Path(argv[2]).resolve()
    spec_version = int(argv[3]) if len(argv) > 3 else 1
    vds = virtualizarr.open_virtual_dataset(source.as_uri(), registry=ObjectStoreRegistry({"file://": LocalStore()}),
                                            parser=HDFParser())
    config = icechunk.RepositoryConfig.default()
    prefix = source.parent.as_uri() + "/"
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix,
                                                                      icechunk.local_filesystem_store(str(source.parent))))
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(repo_dir)), config,
                                      authorize_virtual_chunk_access={prefix: None}, spec_version=spec_version)
    session = repo.writable_session("main")
    vds.vz.to_icechunk(session.store)
    first = session.commit("VirtualiZarr's references")
    session = repo.writable_session("main")
    zarr.open_group(session.store, mode="r+").attrs["title"] = "second"
    second = session.commit("a new title")
    print(json.dumps({"first": first, "second": second}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
