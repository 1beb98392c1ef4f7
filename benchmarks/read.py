"""Our reader against zarr-python 3, TensorStore and netCDF4-python on the same NCZarr store (issue 35).

    python benchmarks/read.py [--repeat 3] [--ntime 144] [--workdir DIR] [--only ROW] [--stores dir,zip,s3,http]

Makes two netCDF-4 files (``precip(time=144, lat=480, lon=1440)`` float32, 398 MB, 16 zlib-1 chunks of
36×240×720; one without and one with the shuffle filter) and one of many small variables (50 ×
``(24, 128, 128)`` float32, chunks 1×128×128, zlib 1 + shuffle), converts each with ``nc2nczarr``
(directory stores), then reads them: the whole variable, one point's time series ``[:, 100, 100]``, a
2-D window of one time step ``[5, 100:340, 300:780]``, and every small variable whole. The first file is
also read, whole and as the time series, from three other stores: a zip (``nc2nczarr SRC OUT.zip``), a
moto S3 server this script starts on 127.0.0.1 (``nc2nczarr SRC s3://bench/KEY#mode=nczarr,s3`` with
``AWS_ENDPOINT_URL``, as the tests do) and Python's ``http.server`` serving the directory store
(``http://127.0.0.1:PORT/NAME``, read-only HTTP: docs/s3.md). Readers: ours through
``nczarr_conformance.open`` and through ``xr.open_dataset(engine="nczarr")``; zarr-python 3 directly
(``ZipStore``, ``FsspecStore`` for S3 with ``endpoint_url`` and for HTTP) and through xarray's zarr engine
(``chunks=None``); TensorStore's ``zarr`` driver on its ``file``, ``zip``, ``s3`` and ``http`` kvstores (it
has no shuffle filter: "cannot open" there); netCDF4-python on the store (netcdf-c's NCZarr: the wheels'
netcdf-c has no zip, its S3 and its lack of an HTTP Zarr store say "cannot open" with netcdf-c's reason)
and on the source netCDF-4 file. Every trial is a fresh interpreter: its time is open + read (imports
excluded, they differ by a second; xarray's engine list, which imports every installed engine's module on the
first open, counts as an import for both xarray rows), best of ``--repeat``; its peak RSS is the child's
``ru_maxrss``, and its growth during open + read is set against the output's size. Values are compared by a
digest of the bytes, dtype and shape. Writes reports/read.md and reports/read.json. Not a timed test.
"""
from __future__ import annotations

import argparse
import compileall
import contextlib
import datetime as dt
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from run import machine  # noqa: E402  (benchmarks/ is not a package)

NSMALL = 50
ROWS: dict[str, tuple[str, str]] = {  # row → (dataset, key as Python text)
    "whole variable": ("big", "..."),
    "one point's time series [:, 100, 100]": ("big", "(slice(None), 100, 100)"),
    "2-D window [5, 100:340, 300:780]": ("big", "(5, slice(100, 340), slice(300, 780))"),
    "whole variable, with shuffle": ("shuffle", "..."),
    f"{NSMALL} small variables, each whole": ("many", "..."),
}
STORE_KINDS = ("dir", "zip", "s3", "http")
#: the rows read from every store kind; the others are read from the directory store only
EVERY_STORE_ROWS = ("whole variable", "one point's time series [:, 100, 100]")
BASELINE = "ours (open), baseline"
READERS = ["ours (open)", "ours (xarray engine)", "zarr-python", "xarray zarr engine", "tensorstore",
           "netCDF4-python (store)", "netCDF4-python (.nc file)"]
S3_BUCKET = "bench"
AWS_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}

# One trial in a fresh interpreter: argv = reader, where (JSON: kind, ours = the URL our reader and netcdf-c
# name, path = local path, "bucket/key" or the HTTP base URL, endpoint = S3's), source .nc, key, variable names.
TRIAL = r'''
import hashlib, json, resource, sys, time
reader, where, source, key_text, names = (sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4],
                                          sys.argv[5].split(","))
kind, store, path, endpoint = where["kind"], where["ours"], where["path"], where.get("endpoint")
inner = where["inner"]  # the folder holding the dataset inside a zip (netcdf-c's layout), else ""
key = eval(key_text)
import numpy as np

def zarr_store():
    """What zarr-python (and xarray's zarr engine) opens for this store kind."""
    import zarr.storage
    if kind == "dir":
        return path
    if kind == "zip":
        return zarr.storage.ZipStore(path, mode="r")
    if kind == "s3":
        return zarr.storage.FsspecStore.from_url(f"s3://{path}", read_only=True,
                                                 storage_options={"endpoint_url": endpoint})
    return zarr.storage.FsspecStore.from_url(path, read_only=True)

def tensorstore_kvstore(n):
    """TensorStore's kvstore spec of one array of this store."""
    if kind == "dir":
        return {"driver": "file", "path": f"{path}/{n}/"}
    if kind == "zip":
        return {"driver": "zip", "base": {"driver": "file", "path": path}, "path": f"{inner}/{n}/"}
    if kind == "s3":
        bucket, _, prefix = path.partition("/")
        return {"driver": "s3", "bucket": bucket, "path": f"{prefix}/{n}/", "endpoint": endpoint,
                "aws_region": "us-east-1"}
    return {"driver": "http", "base_url": f"{path}/", "path": f"{n}/"}

if reader.startswith("ours (open)"):
    import nczarr_conformance as ncz
    import nczarr_conformance.access.lazy  # the package imports it on first use: an import, not a read
    def read():
        with ncz.open(store) as ds:
            return [ds[n][key] for n in names]
elif reader == "ours (xarray engine)":
    import xarray as xr
    import nczarr_conformance.access.xarray_backend  # imported by the entry point on first use
    xr.backends.list_engines()  # xarray imports every installed engine's module on first open: an import
    def read():
        with xr.open_dataset(store, engine="nczarr") as ds:
            return [ds[n][key].values if key is not Ellipsis else ds[n].values for n in names]
elif reader == "zarr-python":
    import zarr
    def read():
        group = zarr.open_group(zarr_store(), path=inner, mode="r")
        return [group[n][key] for n in names]
elif reader == "xarray zarr engine":
    import xarray as xr
    import zarr
    xr.backends.list_engines()
    def read():
        with xr.open_dataset(zarr_store(), engine="zarr", chunks=None, consolidated=False, group=inner or None) as ds:
            return [ds[n][key].values if key is not Ellipsis else ds[n].values for n in names]
elif reader == "tensorstore":
    import tensorstore as ts
    def read():
        out = []
        for n in names:
            arr = ts.open({"driver": "zarr", "kvstore": tensorstore_kvstore(n)}, read=True).result()
            out.append(arr[key].read().result() if key is not Ellipsis else arr.read().result())
        return out
elif reader.startswith("netCDF4-python"):
    import netCDF4
    at = where["netcdf"] if reader.endswith("(store)") else source
    def read():
        with netCDF4.Dataset(at) as ds:
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


def convert(source: Path, target: str) -> None:
    """``nc2nczarr source target``: every store of the benchmark is our converter's output."""
    subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", str(source), target],
                   check=True, env={**os.environ, "PYTHONPATH": str(REPO)})


def make_stores(workdir: Path, ntime: int) -> dict[str, tuple[Path, Path, list[str]]]:
    """dataset → (directory store, source .nc, variable names); made once per ``--ntime`` in ``workdir``."""
    out = {}
    for dataset in ("big", "shuffle", "many"):
        source = workdir / f"{dataset}-{ntime}.nc"
        store = workdir / f"{dataset}-{ntime}.ncz"
        if not store.exists():
            subprocess.run([sys.executable, "-c", MAKE, str(source), dataset, str(ntime), str(NSMALL)], check=True)
            convert(source, str(store))
        names = [f"v{i:02d}" for i in range(NSMALL)] if dataset == "many" else ["precip"]
        out[dataset] = (store, source, names)
    return out


@contextlib.contextmanager
def serving(kinds: list[str], stores: dict[str, tuple[Path, Path, list[str]]],
            workdir: Path) -> Iterator[dict[tuple[str, str], dict[str, str]]]:
    """(store kind, dataset) → where a trial reads it (see TRIAL), with the servers the kinds need running.

    Every dataset has a directory store; the first one ("big") is also put in a zip, on a moto S3 server on
    127.0.0.1 (a real endpoint spoken to over HTTP, as tests/conftest.py's ``moto_server``; the converter
    uploads through ``AWS_ENDPOINT_URL``, which the trials inherit) and served from the directory by
    Python's ``http.server``. Each server is a process of its own: a child's peak RSS starts from what its
    parent held when it was started (Linux carries the old ``mm``'s high-water mark across exec), so this
    process stays small, never holding the 400 MB that moto keeps in memory.
    """
    wheres: dict[tuple[str, str], dict[str, str]] = {}
    big, big_source, _ = stores["big"]
    with contextlib.ExitStack() as stack:
        if "dir" in kinds:
            for dataset, (store, _, _) in stores.items():
                wheres["dir", dataset] = {"kind": "dir", "ours": str(store), "path": str(store), "inner": "",
                                          "netcdf": f"file://{store}#mode=nczarr,file"}
        if "zip" in kinds:
            zipped = big.with_suffix(".zip")
            if not zipped.exists():
                convert(big_source, str(zipped))
            wheres["zip", "big"] = {"kind": "zip", "ours": str(zipped), "path": str(zipped),
                                    "inner": zip_root(zipped), "netcdf": f"file://{zipped}#mode=nczarr,zip"}
        if "s3" in kinds:
            endpoint = stack.enter_context(moto_server())
            subprocess.run([sys.executable, "-c", "import boto3, sys; boto3.client('s3', endpoint_url=sys.argv[1], "
                            "region_name='us-east-1').create_bucket(Bucket=sys.argv[2])", endpoint, S3_BUCKET],
                           check=True)
            convert(big_source, f"s3://{S3_BUCKET}/{big.name}#mode=nczarr,s3")
            wheres["s3", "big"] = {"kind": "s3", "ours": f"s3://{S3_BUCKET}/{big.name}#mode=nczarr,s3",
                                   "path": f"{S3_BUCKET}/{big.name}", "endpoint": endpoint, "inner": "",
                                   "netcdf": f"{endpoint}/{S3_BUCKET}/{big.name}#mode=nczarr,s3"}
        if "http" in kinds:
            port = stack.enter_context(http_server(workdir))
            base = f"http://127.0.0.1:{port}/{big.name}"
            wheres["http", "big"] = {"kind": "http", "ours": base, "path": base, "inner": "",
                                     "netcdf": f"{base}#mode=nczarr"}
        yield wheres


def zip_root(zipped: Path) -> str:
    """The folder inside the zip that holds the dataset (netcdf-c's layout: the zip's name without .zip)."""
    with zipfile.ZipFile(zipped) as archive:
        groups = [name[: -len(".zgroup")] for name in archive.namelist() if name.endswith(".zgroup")]
    return min(groups, key=len).rstrip("/")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def child(argv: list[str], ready: str) -> Iterator[subprocess.Popen[bytes]]:
    """A server process of this benchmark, stopped (by its own pid) on exit; ``ready`` is a URL it answers once up."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(ready, timeout=5).close()
                break
            except urllib.error.HTTPError:
                break  # it answers
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{' '.join(argv[:3])}: the server did not start") from None
                time.sleep(0.2)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 (``python -m moto.server``), its endpoint in ``AWS_ENDPOINT_URL`` meanwhile."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    saved = {k: os.environ.get(k) for k in [*AWS_ENV, "AWS_ENDPOINT_URL", "AWS_PROFILE"]}
    os.environ.update(AWS_ENV, AWS_ENDPOINT_URL=endpoint)
    os.environ.pop("AWS_PROFILE", None)
    try:
        with child([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], endpoint):
            yield endpoint
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# benchmarks/remote_stores.py's server (HTTP/1.1, no Nagle stall), serving argv[1] until its stdin closes
SERVE_HTTP = r'''
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from remote_stores import Counter, serve_directory
server = serve_directory(Path(sys.argv[1]), Counter(), port=int(sys.argv[3]))
sys.stdin.read()
'''


@contextlib.contextmanager
def http_server(root: Path) -> Iterator[int]:
    """Python's ThreadingHTTPServer on 127.0.0.1 serving ``root``, in a process of its own; its port."""
    port = free_port()
    with child([sys.executable, "-c", SERVE_HTTP, str(root), str(HERE), str(port)], f"http://127.0.0.1:{port}/"):
        yield port


def peak_rss(reader: str, where: dict[str, str], source: Path, key: str,
             names: list[str]) -> tuple[dict[str, Any], int]:
    """One trial and its child's peak RSS (wait4's ru_maxrss, bytes)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "ignore"}
    if reader == BASELINE:
        env.update(PYTHONPATH=os.environ["NCZARR_BENCH_BASELINE"], NCZARR_MAX_IN_MEMORY="4G",
                   PYTHONPYCACHEPREFIX=os.environ["NCZARR_BENCH_PYCACHE"], PYTHONDONTWRITEBYTECODE="")
    # cwd: not the checkout, whose package `python -c` would import ahead of PYTHONPATH (the baseline's too)
    proc = subprocess.Popen([sys.executable, "-c", TRIAL, reader, json.dumps(where), str(source), key,
                             ",".join(names)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            cwd=source.parent)
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        last = [line for line in err.decode("utf-8", "replace").strip().splitlines() if line.strip()]
        return {"error": (last[-1] if last else f"exit {proc.returncode}")[:160]}, 0
    return json.loads(out.decode().strip().splitlines()[-1]), usage.ru_maxrss * 1024


def selected(kinds: list[str], only: str | None) -> list[tuple[str, str]]:
    """The (store kind, row) pairs to run: every row on a directory store, EVERY_STORE_ROWS on the others."""
    return [(kind, row) for kind in kinds for row in ROWS
            if (kind == "dir" or row in EVERY_STORE_ROWS) and not (only and only not in row)]


def run(repeat: int, ntime: int, workdir: Path, only: str | None, kinds: list[str]) -> dict[str, Any]:
    stores = make_stores(workdir, ntime)
    compileall.compile_dir(REPO / "nczarr_conformance", quiet=1)  # a trial compiles nothing (installed packages don't)
    rows = []
    with serving(kinds, stores, workdir) as wheres:
        for kind, row in selected(kinds, only):
            dataset, key = ROWS[row]
            where = wheres[kind, dataset]
            _, source, names = stores[dataset]
            cells: dict[str, Any] = {}
            # round-robin, one trial of each reader per round: a load that comes and goes on a shared machine
            # falls on every column alike
            tries: dict[str, list[tuple[dict[str, Any], int]]] = {reader: [] for reader in READERS}
            for _ in range(repeat):
                for reader in READERS:
                    tries[reader].append(peak_rss(reader, where, source, key, names))
            for reader in READERS:
                ok = [(t, rss) for t, rss in tries[reader] if "error" not in t]
                if not ok:
                    cells[reader] = {"error": tries[reader][0][0]["error"]}
                    print(f"{kind} | {row} | {reader}: {cells[reader]['error']}", flush=True)
                    continue
                best = min(ok, key=lambda tr: tr[0]["seconds"])[0]
                cells[reader] = {"seconds": round(best["seconds"], 3), "digest": best["digest"],
                                 "nbytes": best["nbytes"], "peak_rss_mb": round(max(rss for _, rss in ok) / 1e6, 1),
                                 "rss_growth_mb": round(min(t["rss_growth"] for t, _ in ok) / 1e6, 1),
                                 "all_seconds": [round(t["seconds"], 3) for t, _ in ok]}
                print(f"{kind} | {row} | {reader}: {cells[reader]['seconds']} s, "
                      f"peak {cells[reader]['peak_rss_mb']} MB", flush=True)
            rows.append({"store": kind, "row": row, "path": where["ours"], "key": key, "cells": cells})
    return {"generated": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "repeat": repeat, "ntime": ntime,
            "stores": kinds, "machine": machine(), "rows": rows}


def _ratio(ours: dict[str, Any], peer: dict[str, Any]) -> str:
    if "seconds" not in peer:
        return "cannot open" if "error" in peer else "—"
    return f"{ours['seconds'] / peer['seconds']:.2f}×"


STORE_NAMES = {"dir": "directory", "zip": "zip (`nc2nczarr SRC OUT.zip`)",
               "s3": "moto S3 on 127.0.0.1 (`s3://bench/KEY#mode=nczarr,s3`, `AWS_ENDPOINT_URL`)",
               "http": "`http.server` on 127.0.0.1 serving the directory store (`http://127.0.0.1:PORT/NAME`)"}


def render(report: dict[str, Any]) -> str:
    m = report["machine"]
    kinds = report.get("stores", ["dir"])
    lines = [
        "# Reading: ours against zarr-python, TensorStore and netCDF4-python (issue 35)", "",
        f"Generated {report['generated']} by `python benchmarks/read.py` (best of {report['repeat']} rounds, "
        "one trial of each reader a round, each trial a fresh interpreter; seconds are open + read, imports "
        "excluded, xarray's engine list among them). Stores: `nc2nczarr` of "
        f"`precip(time={report['ntime']}, lat=480, lon=1440)` float32 in 16 zlib-1 chunks (36×240×720 at "
        f"time=144), without and with shuffle; {NSMALL} small variables `(24, 128, 128)` float32 in chunks "
        "1×128×128, zlib 1 + shuffle; all in directory stores, the first also in "
        + (", ".join(STORE_NAMES[k] for k in kinds if k != "dir") or "no other store") + " (read whole and "
        "as the time series). A reader that cannot open a store kind says why in its cell (the netCDF4 wheels' "
        "netcdf-c has no zip; a plain-HTTP URL is DAP2 to it, not Zarr).", "",
        f"Machine: {m['cores']} cores, {m['cpu']}, {m['memory']}, Python {m['python']}; "
        + ", ".join(f"{k} {v}" for k, v in m["versions"].items()) + ". Shared with other jobs while it ran: "
        "compare the columns of one run, not runs.", "",
        "| store | read | " + " | ".join(READERS) + " | values equal |",
        "|---|---|" + "---|" * (len(READERS) + 1),
    ]
    for row in report["rows"]:
        cells = row["cells"]
        shown = []
        for reader in READERS:
            cell = cells.get(reader, {})
            shown.append(f"{cell['seconds']:.3f} s" if "seconds" in cell else
                         f"cannot open ({cell.get('error', '?')[:60]})")
        digests = {c["digest"] for c in cells.values() if "digest" in c}
        lines.append(f"| {row.get('store', 'dir')} | {row['row']} | " + " | ".join(shown)
                     + f" | {'yes' if len(digests) == 1 else 'NO'} |")
    refusals = {(row.get("store", "dir"), reader): cell["error"] for row in report["rows"]
                for reader, cell in row["cells"].items() if "error" in cell}
    if refusals:
        lines += ["", "Cannot open, in full (the last line of the reader's error):", ""]
        lines += [f"- {kind}, {reader}: `{error}`" for (kind, reader), error in refusals.items()]
    lines += ["", "Ours (open) as a ratio of each (target: ≤ 1.0× zarr-python, ≤ 1.25× TensorStore, ≤ 1.0× "
              "netCDF4-python):", "",
              "| store | read | ÷ zarr-python | ÷ xarray zarr engine | ÷ TensorStore | ÷ netCDF4 (store) | "
              "÷ netCDF4 (.nc) | ours (xarray engine) ÷ xarray zarr engine |", "|---|---|---|---|---|---|---|---|"]
    for row in report["rows"]:
        c = row["cells"]
        ours = c.get("ours (open)", {})
        if "seconds" not in ours:
            continue
        engine = c.get("ours (xarray engine)", {})
        lines.append(f"| {row.get('store', 'dir')} | {row['row']} | {_ratio(ours, c['zarr-python'])} | "
                     f"{_ratio(ours, c['xarray zarr engine'])} | "
                     f"{_ratio(ours, c['tensorstore'])} | {_ratio(ours, c['netCDF4-python (store)'])} | "
                     f"{_ratio(ours, c['netCDF4-python (.nc file)'])} | "
                     f"{_ratio(engine, c['xarray zarr engine']) if 'seconds' in engine else '—'} |")
    lines += ["", "Peak RSS (MB, the trial's whole process) and its growth during open + read against the "
              "output's size (target: growth ≤ output + 25 %):", "",
              "| store | read | output (MB) | " + " | ".join(READERS) + " |", "|---|---|---|" + "---|" * len(READERS)]
    for row in report["rows"]:
        c = row["cells"]
        size = next((v["nbytes"] for v in c.values() if "nbytes" in v), 0) / 1e6
        lines.append(f"| {row.get('store', 'dir')} | {row['row']} | {size:.1f} | " + " | ".join(
            f"{c[r]['peak_rss_mb']:.0f} (+{c[r]['rss_growth_mb']:.0f})" if "seconds" in c.get(r, {}) else "—"
            for r in READERS) + " |")
    return "\n".join(lines) + "\n"


def store_kinds(text: str) -> list[str]:
    """``--stores``: a comma-separated subset of STORE_KINDS, in the order given."""
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in STORE_KINDS]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(f"{text!r}: store kinds are {','.join(STORE_KINDS)}")
    return list(dict.fromkeys(kinds))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ntime", type=int, default=144)
    parser.add_argument("--workdir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "nczarr-read-bench")
    parser.add_argument("--baseline", type=Path, help="another checkout of this package: its `open()` is timed too, "
                        "as the column 'ours (open), baseline' (NCZARR_MAX_IN_MEMORY=4G: an older fixed cap refused)")
    parser.add_argument("--only", help="run the rows whose name holds this text (reports are not written)")
    parser.add_argument("--stores", type=store_kinds, default=list(STORE_KINDS),
                        help=f"the store kinds to read, comma separated (default {','.join(STORE_KINDS)}; "
                        "reports are written only for all of them)")
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "read.json")
    args = parser.parse_args(argv)
    args.workdir = args.workdir.resolve()
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.baseline is not None:
        READERS.insert(1, BASELINE)
        os.environ["NCZARR_BENCH_BASELINE"] = str(args.baseline.resolve())
        os.environ["NCZARR_BENCH_PYCACHE"] = str(args.workdir / "baseline-pycache")  # its checkout stays untouched
        subprocess.run([sys.executable, "-X", f"pycache_prefix={args.workdir / 'baseline-pycache'}", "-m",
                        "compileall", "-q", str(args.baseline / "nczarr_conformance")], check=True)
    report = run(args.repeat, args.ntime, args.workdir, args.only, args.stores)
    text = render(report)
    print(text)
    if not args.only and args.stores == list(STORE_KINDS):
        args.out.write_text(json.dumps(report, indent=1) + "\n")
        with contextlib.suppress(OSError):
            args.out.with_suffix(".md").write_text(text)


if __name__ == "__main__":
    main()
