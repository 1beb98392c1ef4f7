#!/usr/bin/env python3
"""Debian's netcdf-c 4.9.0 as a conformance writer: ``ncgen -4 -b -o URL`` (the /usr/bin tool, 4.9.0's own
NCZarr code writes the store) from the CDL that ``ncdump -p 9,17`` (4.9.0 too) prints of the case.

ncgen reads CDL, and no CDL of ours may decide what netcdf-c 4.9.0 writes, so the case's model JSON
(docs/contracts/model.md) is first written as a netCDF-4 (HDF5) file with netCDF4-python, exactly as
given: types, dimensions, attributes, fills, chunks, shuffle/zlib, byte order and data. 4.9.0's ncdump
prints that file, and ncgen builds the store from what it printed: both steps are 4.9.0's. The file and
the CDL are left beside the store (``STORE.nc``, ``STORE.cdl``) for whoever wants to see them.

Standalone on purpose (the standard library, and ../model_netcdf4.py: numpy and netCDF4-python; nothing of
nczarr_conformance).

Usage: ``ncgen_write.py MODEL_JSON URL`` (URL: ``file:///abs/store#mode=nczarr,file``, the store not there
yet). Exit 1 with one line on stderr, its last, when a step fails (ncgen 4.9.0 crashes on strings and
refuses unlimited dimensions in NCZarr: findings, reported as such).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # adapters/: the model's netCDF-4 file
from model_netcdf4 import write_file

TIMEOUT = 600  # seconds per tool; the conformance run's own timeout ends the whole call first


def first_line(text: str, fallback: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else fallback


def fail(said: str, line: str) -> int:
    """The tool's own stderr, then the one line that says what failed (the last line: the cell's message)."""
    if said.strip():
        sys.stderr.write(said if said.endswith("\n") else said + "\n")
    print(line, file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: ncgen_write.py MODEL_JSON URL", file=sys.stderr)
        return 2
    model, url = json.loads(Path(argv[1]).read_text(encoding="utf-8")), argv[2]
    store = Path(url.removeprefix("file://").split("#", 1)[0])
    source, cdl = store.parent / f"{store.name}.nc", store.parent / f"{store.name}.cdl"
    try:
        write_file(model, str(source))
    except Exception as exc:  # netCDF4-python refusing the case: one line, not a traceback
        return fail("", f"netCDF4-python: {type(exc).__name__}: {exc}")
    printed = subprocess.run(["ncdump", "-p", "9,17", str(source)], check=False, capture_output=True, timeout=TIMEOUT)
    if printed.returncode != 0:
        said = printed.stderr.decode("utf-8", "replace")
        return fail(said, f"ncdump of the case's netCDF-4 file exit {printed.returncode}: "
                          f"{first_line(said, f'exit {printed.returncode}')}")
    cdl.write_bytes(printed.stdout)
    done = subprocess.run(["ncgen", "-4", "-b", "-o", url, str(cdl)], check=False, capture_output=True, text=True,
                          timeout=TIMEOUT)
    if done.returncode != 0:
        return fail(done.stderr, f"ncgen exit {done.returncode}: "
                                 f"{first_line(done.stderr or done.stdout, f'signal {-done.returncode}')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
