"""Our reader against zarr-python 3, TensorStore and netCDF4-python on the same NCZarr store (issue 35).

    python benchmarks/read.py [--repeat 3] [--ntime 144] [--workdir DIR] [--only ROW]

Makes two netCDF-4 files (``precip(time=144, lat=480, lon=1440)`` float32, 398 MB, 16 zlib-1 chunks of
36×240×720; one without and one with the shuffle filter) and one of many small variables (50 ×
``(24, 128, 128)`` float32, chunks 1×128×128, zlib 1 + shuffle), converts each with ``nc2nczarr``
(directory stores), then reads them: the whole variable, one point's time series ``[:, 100, 100]``, a
2-D window of one time step ``[5, 100:340, 300:780]``, and every small variable whole. Readers: ours
through ``nczarr_conformance.open`` and through ``xr.open_dataset(engine="nczarr")``; zarr-python 3
directly and through xarray's zarr engine (``chunks=None``); TensorStore's ``zarr`` driver (it has no
shuffle filter: "cannot open" there); netCDF4-python on the store (netcdf-c's NCZarr) and on the
source netCDF-4 file. Every trial is a fresh interpreter: its time is open + read (imports excluded,
they differ by a second), best of ``--repeat``; its peak RSS is the child's ``ru_maxrss``, and its
growth during open + read is set against the output's size. Values are compared by a digest of the
bytes, dtype and shape. Writes reports/read.md and reports/read.json. Not a timed test.
"""
from __future__ import annotations

import argparse
import compileall
import contextlib
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from run import machine  # noqa: E402  (benchmarks/ is not a package)

NSMALL = 50
ROWS: dict[str, tuple[str, str]] = {  # row → (store, key as Python text)
    "whole variable": ("big", "..."),
    "one point's time series [:, 100, 100]": ("big", "(slice(None), 100, 100)"),
    "2-D window [5, 100:340, 300:780]": ("big", "(5, slice(100, 340), slice(300, 780))"),
    "whole variable, with shuffle": ("shuffle", "..."),
    f"{NSMALL} small variables, each whole": ("many", "..."),
}
BASELINE = "ours (open), baseline"
READERS = ["ours (open)", "ours (xarray engine)", "zarr-python", "xarray zarr engine", "tensorstore",
           "netCDF4-python (store)", "netCDF4-python (.nc file)"]

# One trial in a fresh interpreter: argv = reader, store dir, source .nc, key, variable names (comma separated).
TRIAL = r'''
import hashlib, json, resource, sys, time
reader, store, source, key_text, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5].split(",")
key = eval(key_text)
import numpy as np
if reader.startswith("ours (open)"):
    import nczarr_conformance as ncz
    import nczarr_conformance.access.lazy  # the package imports it on first use: an import, not a read
    def read():
        with ncz.open(store) as ds:
            return [ds[n][key] for n in names]
elif reader == "ours (xarray engine)":
    import xarray as xr
    import nczarr_conformance.access.xarray_backend  # imported by the entry point on first use
    def read():
        with xr.open_dataset(store, engine="nczarr") as ds:
            return [ds[n][key].values if key is not Ellipsis else ds[n].values for n in names]
elif reader == "zarr-python":
    import zarr
    def read():
        group = zarr.open_group(store, mode="r")
        return [group[n][key] for n in names]
elif reader == "xarray zarr engine":
    import xarray as xr
    def read():
        with xr.open_dataset(store, engine="zarr", chunks=None, consolidated=False) as ds:
            return [ds[n][key].values if key is not Ellipsis else ds[n].values for n in names]
elif reader == "tensorstore":
    import tensorstore as ts
    def read():
        out = []
        for n in names:
            arr = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": f"{store}/{n}"}},
                          read=True).result()
            out.append(arr[key].read().result() if key is not Ellipsis else arr.read().result())
        return out
elif reader.startswith("netCDF4-python"):
    import netCDF4
    where = f"file://{store}#mode=nczarr,file" if reader.endswith("(store)") else source
    def read():
        with netCDF4.Dataset(where) as ds:
            ds.set_auto_mask(False)
            return [np.asarray(ds[n][key]) for n in names]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
t0 = time.perf_counter()
values = read()
seconds = time.perf_counter() - t0
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
digest = hashlib.sha256()
for v in values:
    v = np.ascontiguousarray(v)
    digest.update(f"{v.dtype.str}{v.shape}".encode()); digest.update(v.reshape(-1).view(np.uint8))
print(json.dumps({"seconds": seconds, "digest": digest.hexdigest()[:16], "nbytes": sum(v.nbytes for v in values),
                  "rss_growth": after - before}))
'''

MAKE = r'''
import sys, numpy as np, netCDF4
path, kind, ntime = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = np.random.default_rng(35)
with netCDF4.Dataset(path, "w") as nc:
    if kind == "many":
        for d, n in (("time", 24), ("lat", 128), ("lon", 128)):
            nc.createDimension(d, n)
        for i in range(int(sys.argv[4])):
            v = nc.createVariable(f"v{i:02d}", "f4", ("time", "lat", "lon"), zlib=True, complevel=1, shuffle=True,
                                  chunksizes=(1, 128, 128))
            v[:] = (rng.random((24, 128, 128), dtype=np.float32) * 100).round(1)
    else:
        for d, n in (("time", ntime), ("lat", 480), ("lon", 1440)):
            nc.createDimension(d, n)
        v = nc.createVariable("precip", "f4", ("time", "lat", "lon"), zlib=True, complevel=1,
                              shuffle=kind == "shuffle", chunksizes=(ntime // 4, 240, 720))
        base = (rng.random((480, 1440), dtype=np.float32) * 10).round(1)
        step = ntime // 4  # whole chunk rows: a chunk is compressed once (netCDF4's cache holds less than one)
        for t0 in range(0, ntime, step):
            times = np.arange(t0, min(t0 + step, ntime)) % 7
            v[t0:t0 + len(times)] = base[None] + (times.astype(np.float32) * 0.5)[:, None, None]
'''


def make_stores(workdir: Path, ntime: int) -> dict[str, tuple[Path, Path, list[str]]]:
    """name → (store, source .nc, variable names); made once per ``--ntime`` in ``workdir``."""
    out = {}
    for kind in ("big", "shuffle", "many"):
        source = workdir / f"{kind}-{ntime}.nc"
        store = workdir / f"{kind}-{ntime}.ncz"
        if not store.exists():
            subprocess.run([sys.executable, "-c", MAKE, str(source), kind, str(ntime), str(NSMALL)], check=True)
            subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", str(source), str(store)],
                           check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        names = [f"v{i:02d}" for i in range(NSMALL)] if kind == "many" else ["precip"]
        out[kind] = (store, source, names)
    return out


def peak_rss(reader: str, store: Path, source: Path, key: str, names: list[str]) -> tuple[dict[str, Any], int]:
    """One trial and its child's peak RSS (wait4's ru_maxrss, bytes)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "ignore"}
    if reader == BASELINE:
        env.update(PYTHONPATH=os.environ["NCZARR_BENCH_BASELINE"], NCZARR_MAX_IN_MEMORY="4G",
                   PYTHONPYCACHEPREFIX=os.environ["NCZARR_BENCH_PYCACHE"], PYTHONDONTWRITEBYTECODE="")
    proc = subprocess.Popen([sys.executable, "-c", TRIAL, reader, str(store), str(source), key, ",".join(names)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        last = [line for line in err.decode("utf-8", "replace").strip().splitlines() if line.strip()]
        return {"error": (last[-1] if last else f"exit {proc.returncode}")[:160]}, 0
    return json.loads(out.decode().strip().splitlines()[-1]), usage.ru_maxrss * 1024


def run(repeat: int, ntime: int, workdir: Path, only: str | None) -> dict[str, Any]:
    stores = make_stores(workdir, ntime)
    compileall.compile_dir(REPO / "nczarr_conformance", quiet=1)  # a trial compiles nothing (installed packages don't)
    rows = []
    for row, (kind, key) in ROWS.items():
        if only and only not in row:
            continue
        store, source, names = stores[kind]
        cells: dict[str, Any] = {}
        # round-robin, one trial of each reader per round: a load that comes and goes on a shared machine
        # falls on every column alike
        tries: dict[str, list[tuple[dict[str, Any], int]]] = {reader: [] for reader in READERS}
        for _ in range(repeat):
            for reader in READERS:
                tries[reader].append(peak_rss(reader, store, source, key, names))
        for reader in READERS:
            ok = [(t, rss) for t, rss in tries[reader] if "error" not in t]
            if not ok:
                cells[reader] = {"error": tries[reader][0][0]["error"]}
                print(f"{row} | {reader}: {cells[reader]['error']}", flush=True)
                continue
            best = min(ok, key=lambda tr: tr[0]["seconds"])[0]
            cells[reader] = {"seconds": round(best["seconds"], 3), "digest": best["digest"], "nbytes": best["nbytes"],
                             "peak_rss_mb": round(max(rss for _, rss in ok) / 1e6, 1),
                             "rss_growth_mb": round(min(t["rss_growth"] for t, _ in ok) / 1e6, 1),
                             "all_seconds": [round(t["seconds"], 3) for t, _ in ok]}
            print(f"{row} | {reader}: {cells[reader]['seconds']} s, peak {cells[reader]['peak_rss_mb']} MB", flush=True)
        rows.append({"row": row, "store": store.name, "key": key, "cells": cells})
    return {"generated": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "repeat": repeat, "ntime": ntime,
            "machine": machine(), "rows": rows}


def _ratio(ours: dict[str, Any], peer: dict[str, Any]) -> str:
    if "seconds" not in peer:
        return "cannot open" if "error" in peer else "—"
    return f"{ours['seconds'] / peer['seconds']:.2f}×"


def render(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        "# Reading: ours against zarr-python, TensorStore and netCDF4-python (issue 35)", "",
        f"Generated {report['generated']} by `python benchmarks/read.py` (best of {report['repeat']} rounds, "
        "one trial of each reader a round, each trial a fresh interpreter; seconds are open + read, imports "
        "excluded). Stores: `nc2nczarr` of "
        f"`precip(time={report['ntime']}, lat=480, lon=1440)` float32 in 16 zlib-1 chunks (36×240×720 at "
        f"time=144), without and with shuffle; {NSMALL} small variables `(24, 128, 128)` float32 in chunks "
        "1×128×128, zlib 1 + shuffle. Directory stores.", "",
        f"Machine: {m['cores']} cores, {m['cpu']}, {m['memory']}, Python {m['python']}; "
        + ", ".join(f"{k} {v}" for k, v in m["versions"].items()) + ". Shared with other jobs while it ran: "
        "compare the columns of one run, not runs.", "",
        "| read | " + " | ".join(READERS) + " | values equal |",
        "|---|" + "---|" * (len(READERS) + 1),
    ]
    for row in report["rows"]:
        cells = row["cells"]
        shown = []
        for reader in READERS:
            cell = cells.get(reader, {})
            shown.append(f"{cell['seconds']:.3f} s" if "seconds" in cell else
                         f"cannot open ({cell.get('error', '?')[:60]})")
        digests = {c["digest"] for c in cells.values() if "digest" in c}
        lines.append(f"| {row['row']} | " + " | ".join(shown) + f" | {'yes' if len(digests) == 1 else 'NO'} |")
    lines += ["", "Ours (open) as a ratio of each (target: ≤ 1.0× zarr-python, ≤ 1.25× TensorStore, ≤ 1.0× "
              "netCDF4-python):", "",
              "| read | ÷ zarr-python | ÷ xarray zarr engine | ÷ TensorStore | ÷ netCDF4 (store) | ÷ netCDF4 (.nc) | "
              "ours (xarray engine) ÷ xarray zarr engine |", "|---|---|---|---|---|---|---|"]
    for row in report["rows"]:
        c = row["cells"]
        ours = c.get("ours (open)", {})
        if "seconds" not in ours:
            continue
        engine = c.get("ours (xarray engine)", {})
        lines.append(f"| {row['row']} | {_ratio(ours, c['zarr-python'])} | {_ratio(ours, c['xarray zarr engine'])} | "
                     f"{_ratio(ours, c['tensorstore'])} | {_ratio(ours, c['netCDF4-python (store)'])} | "
                     f"{_ratio(ours, c['netCDF4-python (.nc file)'])} | "
                     f"{_ratio(engine, c['xarray zarr engine']) if 'seconds' in engine else '—'} |")
    lines += ["", "Peak RSS (MB, the trial's whole process) and its growth during open + read against the "
              "output's size (target: growth ≤ output + 25 %):", "",
              "| read | output (MB) | " + " | ".join(READERS) + " |", "|---|---|" + "---|" * len(READERS)]
    for row in report["rows"]:
        c = row["cells"]
        size = next((v["nbytes"] for v in c.values() if "nbytes" in v), 0) / 1e6
        lines.append(f"| {row['row']} | {size:.1f} | " + " | ".join(
            f"{c[r]['peak_rss_mb']:.0f} (+{c[r]['rss_growth_mb']:.0f})" if "seconds" in c.get(r, {}) else "—"
            for r in READERS) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ntime", type=int, default=144)
    parser.add_argument("--workdir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "nczarr-read-bench")
    parser.add_argument("--baseline", type=Path, help="another checkout of this package: its `open()` is timed too, "
                        "as the column 'ours (open), baseline' (NCZARR_MAX_IN_MEMORY=4G: an older fixed cap refused)")
    parser.add_argument("--only", help="run the rows whose name holds this text (reports are not written)")
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "read.json")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.baseline is not None:
        READERS.insert(1, BASELINE)
        os.environ["NCZARR_BENCH_BASELINE"] = str(args.baseline.resolve())
        os.environ["NCZARR_BENCH_PYCACHE"] = str(args.workdir / "baseline-pycache")  # its checkout stays untouched
        subprocess.run([sys.executable, "-X", f"pycache_prefix={args.workdir / 'baseline-pycache'}", "-m",
                        "compileall", "-q", str(args.baseline / "nczarr_conformance")], check=True)
    report = run(args.repeat, args.ntime, args.workdir, args.only)
    text = render(report)
    print(text)
    if not args.only:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
        with contextlib.suppress(OSError):
            args.out.with_suffix(".md").write_text(text)


if __name__ == "__main__":
    main()
