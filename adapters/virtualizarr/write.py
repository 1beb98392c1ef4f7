#!/usr/bin/env python3
"""VirtualiZarr (its HDF parser) as a conformance writer of references: the case's netCDF-4 file, written by
netCDF4-python from the model (adapters/model_netcdf4.py), opened as a user opens it,
``open_virtual_dataset("file://…/case.nc", registry=…, parser=HDFParser())``, and saved with
``vds.vz.to_kerchunk(OUT, format=FORMAT)``: kerchunk JSON (``json``) or kerchunk Parquet (``parquet``); or
(``icechunk``) ``vds.vz.to_icechunk`` into a new Icechunk repository at OUT, one commit on ``main``, its
virtual chunk container the directory of the netCDF-4 file (a ``file://`` prefix, as icechunk's documentation
writes local virtual chunks). The repository is written in Icechunk's spec version 1: icechunk 2.3.0 (this
venv) writes spec 2 by default, which icechunk 1.x (the newest on Python 3.11, where the readers run) cannot
read.

Nothing is tuned: VirtualiZarr's defaults decide (coordinate variables loaded and inlined, as
``open_virtual_dataset`` does by default; the root group only, as ``open_virtual_dataset`` reads). The
netCDF-4 file stays beside the references (``OUT.nc``): they point into it.

Standalone on purpose (VirtualiZarr and its dependencies, netCDF4-python; nothing of nczarr_conformance), run
from a virtual environment of its own (VirtualiZarr 2.8.0 needs Python >= 3.12; scripts/test makes
~/.cache/nczarr-virtualizarr).

Usage: ``write.py json|parquet|icechunk MODEL_JSON OUT``. Exit 1 with one line on stderr, its last, when a step fails.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # adapters/: the shared model → netCDF-4 step

FORMATS = ("json", "parquet", "icechunk")


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[1] not in FORMATS:
        print("usage: write.py json|parquet|icechunk MODEL_JSON OUT", file=sys.stderr)
        return 2
    from model_netcdf4 import write_file

    fmt, model, out = argv[1], json.loads(Path(argv[2]).read_text(encoding="utf-8")), Path(argv[3]).resolve()
    source = out.parent / f"{out.name}.nc"
    try:
        write_file(model, str(source))
    except Exception as exc:  # netCDF4-python refusing the case: one line, not a traceback
        print(f"netCDF4-python: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    try:
        import virtualizarr
        from obspec_utils.registry import ObjectStoreRegistry
        from obstore.store import LocalStore
        from virtualizarr.parsers import HDFParser

        registry = ObjectStoreRegistry({"file://": LocalStore()})
        vds = virtualizarr.open_virtual_dataset(source.as_uri(), registry=registry, parser=HDFParser())
        if fmt == "icechunk":
            to_icechunk(vds, source, out)
        else:
            vds.vz.to_kerchunk(str(out), format=fmt)
    except Exception as exc:  # VirtualiZarr's failure is the finding: one line
        text = f"{type(exc).__name__}: {exc}".strip().splitlines()
        print(f"virtualizarr {virtualizarr.__version__}: {text[0] if text else type(exc).__name__}", file=sys.stderr)
        return 1
    return 0


def to_icechunk(vds: object, source: Path, out: Path) -> None:
    """``vds`` into a new spec-v1 Icechunk repository at ``out``: one commit, its chunks virtual references into
    ``source``, whose directory is the repository's (authorized) virtual chunk container."""
    import icechunk

    prefix = source.parent.as_uri() + "/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(
        prefix, icechunk.local_filesystem_store(str(source.parent))))
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(out)), config,
                                      authorize_virtual_chunk_access={prefix: None}, spec_version=1)
    session = repo.writable_session("main")
    vds.vz.to_icechunk(session.store)  # type: ignore[attr-defined]
    session.commit("VirtualiZarr's virtual references to the case's netCDF-4 file")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
