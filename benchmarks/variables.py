"""Benchmark a file of many small variables: nc2nczarr against nccopy 4.9.0 and the file-creation floor.

    python benchmarks/variables.py [--variables 2000] [--out FILE.json]   (benchmarks/run.py --only variables)

netcdf-c's ``ref_hdf5_compat1.nc`` has 2,000 variables of 10 floats; its values are never written, so a
conversion writes no chunk. This makes the same shape with every variable written (benchmarks/data/
variables.nc): a directory and three objects per variable, 6,000 small files in all. Each tool writes
to a fresh name and is timed as its own process (wall, user and system CPU from ``wait4``); ``cp -r`` of
our output tree is the floor any directory writer stands on, on this file system, at this moment.

Why that floor moves: on ext4 without a journal (this machine's), each inode created skips the inodes
deleted in the last ~35 s (``recently_deleted`` in ``find_inode_bit``, 60-70 % of the system time in
``perf``), so every row is slower right after a ``rm -rf`` of many files, ours, nccopy's and ``cp``'s
alike. Compare rows of one run, never runs of different times.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
NC2 = [sys.executable, "-m", "nczarr_conformance.cli.convert", "--quiet"]


def make_source(path: Path, variables: int) -> None:
    """``variables`` float variables of 10 values on one dimension, each written (one chunk each)."""
    import netCDF4
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    with netCDF4.Dataset(str(path), "w") as nc:
        nc.createDimension("x", 10)
        for i in range(variables):
            nc.createVariable(f"a_{i}", "f4", ("x",))[:] = np.arange(10, dtype="f4") + i


def measure(cmd: list[str]) -> dict[str, object]:
    """Wall time and the process's own user and system CPU (``wait4``), its exit and first stderr line."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    stderr = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    return {"seconds": round(seconds, 2), "user": round(usage.ru_utime, 2), "system": round(usage.ru_stime, 2),
            "exit": code, "message": "" if code == 0 else stderr.strip().splitlines()[0][:200] if stderr else "signal"}


def objects(path: Path) -> int:
    return sum(1 for p in path.rglob("*") if p.is_file())


def run(work: Path, variables: int = 2000) -> dict[str, object]:
    src = HERE / "data" / f"variables-{variables}.nc"
    if not src.exists():
        make_source(src, variables)
    subprocess.run(["cat", str(src)], stdout=subprocess.DEVNULL, check=False)  # every row reads from page cache
    jobs = [
        ("nc2nczarr → dir", [*NC2, str(src), str(work / "ours.file")], work / "ours.file"),
        ("nccopy 4.9.0 → nczarr dir", ["nccopy", str(src), f"file://{work}/nccopy.file#mode=nczarr,file"],
         work / "nccopy.file"),
        ("cp -r of our output tree (file-creation floor)", ["cp", "-r", str(work / "ours.file"), str(work / "cp.file")],
         work / "cp.file"),
    ]
    rows = []
    for name, cmd, out in jobs:
        if shutil.which(cmd[0]) is None and cmd[0] != sys.executable:
            rows.append({"job": name, "exit": None, "message": f"{cmd[0]} not installed"})
            continue
        rows.append({"job": name, **measure(cmd), "objects": objects(out)})
    return {"variables": variables, "input_mb": round(src.stat().st_size / 1e6, 2), "results": rows}


def render(doc: dict[str, object]) -> str:
    lines = [f"{doc['variables']} variables of 10 floats, each written ({doc['input_mb']} MB; netcdf-c's "
             "ref_hdf5_compat1.nc has the shape, its values unwritten); each tool writes a fresh name. System "
             "time is the file system's: ext4 without a journal skips every inode deleted in the last ~35 s on each "
             "creation, so all rows slow down together after a `rm -rf` (benchmarks/variables.py).", "",
             "| job | seconds | user | system | objects | exit |", "|---|---|---|---|---|---|"]
    for r in doc["results"]:  # type: ignore[attr-defined]
        message = (": " + r["message"]) if r.get("message") else ""
        lines.append(f"| {r['job']} | {r.get('seconds', '')} | {r.get('user', '')} | {r.get('system', '')} | "
                     f"{r.get('objects', '')} | {r.get('exit', '')}{message} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variables", type=int, default=2000)
    ap.add_argument("--out", help="write the rows as JSON here too")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="variables-bench-") as work:
        doc = run(Path(work), args.variables)
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(render(doc))


if __name__ == "__main__":
    main()
