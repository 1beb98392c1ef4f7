#!/usr/bin/env python3
"""kerchunk's own ``SingleHdf5ToZarr`` as a conformance writer of references: the case's netCDF-4 file, written
by netCDF4-python from the model (adapters/model_netcdf4.py), translated as kerchunk's documentation does,
``SingleHdf5ToZarr(PATH, inline_threshold=…).translate()``, and saved as kerchunk JSON.

kerchunk's defaults decide (``inline_threshold=500``: chunks under 500 bytes are inlined; ``vlen_encode="embed"``:
variable-length strings embedded). The netCDF-4 file stays beside the references (``OUT.nc``): they point
into it.

Standalone on purpose (kerchunk, h5py, netCDF4-python; nothing of nczarr_conformance).

Usage: ``write.py MODEL_JSON OUT.json``. Exit 1 with one line on stderr, its last, when a step fails.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # adapters/: the shared model → netCDF-4 step


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: write.py MODEL_JSON OUT.json", file=sys.stderr)
        return 2
    from model_netcdf4 import write_file

    model, out = json.loads(Path(argv[1]).read_text(encoding="utf-8")), Path(argv[2]).resolve()
    source = out.parent / f"{out.name}.nc"
    try:
        write_file(model, str(source))
    except Exception as exc:  # netCDF4-python refusing the case: one line, not a traceback
        print(f"netCDF4-python: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    try:
        import kerchunk
        from kerchunk.hdf import SingleHdf5ToZarr

        refs = SingleHdf5ToZarr(str(source)).translate()
        out.write_text(json.dumps(refs), encoding="utf-8")
    except Exception as exc:  # kerchunk's failure is the finding: one line
        text = f"{type(exc).__name__}: {exc}".strip().splitlines()
        print(f"kerchunk {kerchunk.__version__}: {text[0] if text else type(exc).__name__}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
