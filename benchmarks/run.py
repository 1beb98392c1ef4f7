"""Benchmark nc2nczarr against nccopy (netcdf-c 4.9.0) and xarray on the same file, in one run.

    python benchmarks/run.py [--ntime 256] [--only s3|concat|dump|report|references|read|variables]

Makes the reference files if missing (make_reference.py), runs each tool as its own process,
and records wall time, peak RSS (the process's own, from wait4), output size and objects
written, with the machine, in reports/bench.md and reports/bench.json. Not a timed test.
``--only s3`` runs the S3 rows alone (conversion to a moto server against boto3 uploading
the directory output of the same conversion).
"""
from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
XARRAY = "import sys, xarray as xr; xr.open_dataset(sys.argv[1]).to_zarr(sys.argv[2], zarr_format=2, consolidated=True)"


def measure(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, object]:
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})})
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    stderr = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    return {"seconds": round(seconds, 2), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1), "exit": code,
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
            "message": "" if code == 0 else " / ".join(stderr.strip().splitlines()[:2])[:200] or "signal"}


def output_size(path: Path) -> tuple[int, int]:
    if path.is_file() and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            infos = [i for i in zf.infolist() if not i.is_dir()]
        return path.stat().st_size, len(infos)
    if path.is_file():
        return path.stat().st_size, 1
    files = [p for p in path.rglob("*") if p.is_file()] if path.exists() else []
    return sum(p.stat().st_size for p in files), len(files)


def machine() -> dict[str, object]:
    cpu = ""
    with contextlib.suppress(OSError, StopIteration):
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    mem = ""
    with contextlib.suppress(OSError, StopIteration):
        mem = next(line.split(":", 1)[1].strip() for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal"))
    versions = {}
    from importlib.metadata import PackageNotFoundError, version

    for mod in ("netCDF4", "numcodecs", "h5py", "xarray", "zarr"):
        try:
            versions[mod] = version(mod)
        except PackageNotFoundError:
            versions[mod] = "missing"
    nccopy = (subprocess.run(["ncdump"], capture_output=True, text=True, check=False).stderr
              if shutil.which("ncdump") else "")
    return {"cores": os.cpu_count(), "cpu": cpu, "memory": mem, "python": platform.python_version(),
            "platform": platform.platform(), "versions": versions,
            "netcdf_c_tools": next((w for w in nccopy.split() if w[:1].isdigit() and w.count(".") >= 2), "missing")}


def run(ntime: int, only: str = "all") -> dict[str, object]:
    subprocess.run([sys.executable, str(HERE / "make_reference.py"), "--ntime", str(ntime)], check=True,
                   capture_output=True)
    src, fixed = HERE / "data" / "precip.nc", HERE / "data" / "precip_fixed.nc"
    many = HERE / "data" / "many.nc"
    work = Path(tempfile.mkdtemp(prefix="ncz-bench-"))
    nc2 = [sys.executable, "-m", "nczarr_conformance.cli.convert", "--quiet"]
    jobs = [] if only == "s3" else [
        ("cp of the .nc (copy limit)", src, ["cp", str(src), str(work / "copy.nc")], work / "copy.nc"),
        ("nc2nczarr --version (startup)", src, [*nc2[:-1], "--version"], work / "none"),
        ("imports a conversion needs (numpy, numcodecs, netCDF4, h5py; the floor before the first byte)", src,
         [sys.executable, "-c", "import numpy, numcodecs, netCDF4, h5py"], work / "none"),
        ("nc2nczarr (direct chunk copy) → dir", src, [*nc2, str(src), str(work / "ours.file")], work / "ours.file"),
        ("nc2nczarr (direct chunk copy) → zip", src, [*nc2, str(src), str(work / "ours.zip")], work / "ours.zip"),
        ("nc2nczarr (direct) fixed-dim → dir", fixed, [*nc2, str(fixed), str(work / "oursf.file")],
         work / "oursf.file"),
        ("nc2nczarr --no-direct-copy → dir", src, [*nc2, "--no-direct-copy", str(src), str(work / "re.file")],
         work / "re.file"),
        ("nccopy 4.9.0 → nczarr dir (unlimited)", src,
         ["nccopy", str(src), f"file://{work}/nccopy_u.file#mode=nczarr,file"], work / "nccopy_u.file"),
        ("nccopy 4.9.0 fixed-dim → nczarr dir", fixed,
         ["nccopy", str(fixed), f"file://{work}/nccopy.file#mode=nczarr,file"], work / "nccopy.file"),
        ("xarray to_zarr (consolidated)", src, [sys.executable, "-c", XARRAY, str(src), str(work / "xr.zarr")],
         work / "xr.zarr"),
        # many small chunks (20 variables x 365 chunks of 64 KiB): per-chunk cost dominates
        ("many: cp of the .nc (copy limit)", many, ["cp", str(many), str(work / "many.nc")], work / "many.nc"),
        ("many: nc2nczarr (direct) → dir", many, [*nc2, str(many), str(work / "many.file")], work / "many.file"),
        ("many: cp -r of that output dir (file-creation limit)", many,
         ["cp", "-r", str(work / "many.file"), str(work / "many_cp.file")], work / "many_cp.file"),
        ("many: nc2nczarr (direct) → zip", many, [*nc2, str(many), str(work / "many.zip")], work / "many.zip"),
        ("many: nccopy 4.9.0 → nczarr dir", many,
         ["nccopy", str(many), f"file://{work}/many_nccopy.file#mode=nczarr,file"], work / "many_nccopy.file"),
    ]
    rows = []
    for name, source, cmd, out in jobs:
        if name.startswith("cp"):
            subprocess.run(["cat", str(source)], stdout=subprocess.DEVNULL, check=False)  # both read from page cache
        if not shutil.which(cmd[0]) and not cmd[0].startswith(sys.executable):
            rows.append({"job": name, "exit": None, "message": f"{cmd[0]} not installed"})
            continue
        result = measure(cmd)
        size, objects = output_size(out)
        rows.append({"job": name, "input": source.name, **result, "output_mb": round(size / 1e6, 1),
                     "objects": objects})
    rows += _s3_rows([("", src, work / "ours.file"), ("many: ", many, work / "many.file")])
    profiles = {} if only == "s3" else {"big": profile_conversion(src, work), "many": profile_conversion(many, work)}
    shutil.rmtree(work, ignore_errors=True)
    return {"report": "nczarr-bench/1", "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "input_mb": round(src.stat().st_size / 1e6, 1), "many_mb": round(many.stat().st_size / 1e6, 1),
            "machine": machine(), "results": rows, "profiles": profiles}


def profile_conversion(source: Path, work: Path) -> dict[str, float]:
    """Where one ``nc2nczarr`` → dir spends its time, from a cProfile run (each part a little inflated; cProfile
    sees the main thread only): start-up and imports, the header, plan and metadata, the verification of a
    copied chunk per codec chain, the chunk files' own system calls (``open`` and ``copy_file_range``, done in
    the kernel) and the rest of the copies (a big file's run on threads, whose time shows as the wait)."""
    import pstats

    stats, out = work / "convert.pstats", work / "profiled.file"
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "cProfile", "-o", str(stats), "-m", "nczarr_conformance.cli.convert",
                    "--quiet", str(source), str(out)], check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(out, ignore_errors=True)
    table = pstats.Stats(str(stats)).stats  # type: ignore[attr-defined]

    def cumulative(name: str, where: str = "") -> float:
        return sum(v[3] for k, v in table.items() if k[2] == name and where in k[0])

    def own(name: str) -> float:
        return sum(v[2] for k, v in table.items() if k[2] == name)

    whole = max(v[3] for v in table.values())
    convert = cumulative("convert", "from_netcdf")
    chunks = cumulative("_write_chunks", "writer")
    verified = cumulative("_raw_copy_verified", "writer")
    calls = own("<built-in method posix.open>") + own("<built-in method posix.copy_file_range>")
    return {"start-up and imports": round(whole - convert, 2),
            "header, plan and metadata": round(convert - chunks, 2),
            "one copied chunk per codec chain decoded and compared": round(verified, 2),
            "chunk files' open and copy_file_range on the main thread (kernel)": round(calls, 2),
            "the rest of the chunk copies (Python around each, or waiting for the copy threads)":
                round(chunks - verified - calls, 2),
            "whole run (profiled)": round(whole, 2)}


#: boto3 alone, two ways, uploading a directory tree with the concurrency our S3 store uses
UPLOAD_S3TRANSFER = """
import os, sys, boto3, botocore.config
from boto3.s3.transfer import TransferConfig
from s3transfer.manager import TransferManager
root, bucket, prefix, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
client = boto3.client("s3", config=botocore.config.Config(max_pool_connections=n + 16))
config = TransferConfig(multipart_threshold=16 * 2**20, multipart_chunksize=8 * 2**20, max_concurrency=n)
with TransferManager(client, config) as tm:
    futures = [tm.upload(os.path.join(d, f), bucket, prefix + "/" + os.path.relpath(os.path.join(d, f), root))
               for d, _, names in os.walk(root) for f in names]
    for future in futures:
        future.result()
"""
UPLOAD_POOL = """
import os, sys, boto3, botocore.config
from concurrent.futures import ThreadPoolExecutor
root, bucket, prefix, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
client = boto3.client("s3", config=botocore.config.Config(max_pool_connections=n + 16))
def put(path):
    with open(path, "rb") as fh:
        client.put_object(Bucket=bucket, Key=prefix + "/" + os.path.relpath(path, root), Body=fh.read())
with ThreadPoolExecutor(n) as pool:
    list(pool.map(put, [os.path.join(d, f) for d, _, names in os.walk(root) for f in names]))
"""
#: our S3 store alone on the same objects: separates the uploader from the conversion's own work
UPLOAD_OURS = """
import os, sys
from nczarr_conformance.stores.s3 import S3Store
root, bucket, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
store = S3Store(bucket, prefix, mode="w")
for d, _, names in os.walk(root):
    for f in names:
        with open(os.path.join(d, f), "rb") as fh:
            store.put("/" + os.path.relpath(os.path.join(d, f), root), fh.read())
store.commit()
"""
S3_CONCURRENCY = 16  # nczarr_conformance.stores.s3.UPLOAD_CONCURRENCY


def _s3_rows(inputs: list[tuple[str, Path, Path]], repeat: int = 2) -> list[dict[str, object]]:
    """nc2nczarr to S3 against boto3 alone uploading the directory output of the same conversion.

    Each job runs on a fresh moto server process (empty, and its memory apart from the
    measured process's: a server inside this process would be counted in every child's
    peak RSS, which includes the parent's image at fork), ``repeat`` times in turns, best
    time kept: the machine is shared and noisy.
    """
    try:
        import boto3
        import moto.server  # noqa: F401
    except ImportError:
        return [{"job": "nc2nczarr → s3 (moto)", "exit": None, "message": "moto not installed"}]
    import signal
    import socket

    def on_fresh_server(cmd: list[str], env: dict[str, str]) -> dict[str, object]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        env = {**env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
        try:
            for _ in range(300):  # until it listens
                with socket.socket() as sock:
                    if sock.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.1)
            client = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name="us-east-1",
                                  aws_access_key_id="bench", aws_secret_access_key="bench")
            client.create_bucket(Bucket="bench")
            result = measure(cmd, env)
            objs = [o for page in client.get_paginator("list_objects_v2").paginate(Bucket="bench")
                    for o in page.get("Contents", [])]
            return {**result, "output_mb": round(sum(o["Size"] for o in objs) / 1e6, 1), "objects": len(objs)}
        finally:
            server.send_signal(signal.SIGINT)  # werkzeug stops on SIGINT
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()

    env = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}
    rows: list[dict[str, object]] = []
    for label, src, tree in inputs:
        if not tree.exists():  # the directory output the boto3 rows upload (--only s3 makes it here)
            subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", "--quiet", str(src), str(tree)],
                           check=True)
        jobs = [(f"{label}nc2nczarr (direct) → s3 (moto server)",
                 [sys.executable, "-m", "nczarr_conformance.cli.convert", "--quiet", str(src),
                  "s3://bench/ds#mode=nczarr,s3"]),
                (f"{label}boto3 alone: s3transfer upload of that dir output ({S3_CONCURRENCY} at once)",
                 [sys.executable, "-c", UPLOAD_S3TRANSFER, str(tree), "bench", "ds", str(S3_CONCURRENCY)]),
                (f"{label}boto3 alone: put_object from {S3_CONCURRENCY} threads, same dir output",
                 [sys.executable, "-c", UPLOAD_POOL, str(tree), "bench", "ds", str(S3_CONCURRENCY)]),
                (f"{label}our S3 store alone: put() of that dir output (no conversion)",
                 [sys.executable, "-c", UPLOAD_OURS, str(tree), "bench", "ds"])]
        best: dict[str, dict[str, object]] = {}
        for _ in range(repeat):
            for name, cmd in jobs:
                subprocess.run(["cat", str(src)], stdout=subprocess.DEVNULL, check=False)  # page cache for all
                result = on_fresh_server(cmd, env)
                kept = best.get(name)
                if kept is None or (result["exit"] == 0 and float(str(result["seconds"])) <
                                    float(str(kept["seconds"]))) or kept["exit"] != 0:
                    best[name] = result
        for name, _ in jobs:
            rows.append({"job": name, "input": src.name, **best[name],
                         "note": f"best of {repeat}; a fresh moto server each run"})
    return rows


def _seconds(rows: dict[str, dict[str, object]], job: str) -> float | None:
    value = rows.get(job, {}).get("seconds")
    return float(str(value)) if value not in (None, "") else None


def issue26(doc: dict[str, object]) -> str:
    """Issue 26's targets, each as measured by the sections below (one run when they come from one), met or not,
    and for a gap the measured part that holds it."""
    rows: dict[str, dict[str, object]] = {str(r["job"]): r for r in doc.get("results", [])}  # type: ignore[attr-defined]
    table: list[tuple[str, str, str, str]] = []

    def ratio_row(target: str, value: float | None, limit: float, text: str, gap: str, above: bool = False) -> None:
        if value is None:
            return
        met = value >= limit if above else value <= limit
        table.append((target, text, "met" if met else "not met", "" if met else gap))

    imports = _seconds(rows, "imports a conversion needs (numpy, numcodecs, netCDF4, h5py; the floor before the first "
                             "byte)")
    cp, big = _seconds(rows, "cp of the .nc (copy limit)"), _seconds(rows, "nc2nczarr (direct chunk copy) → dir")
    if cp and big and imports is not None:
        parts = (doc.get("profiles") or {}).get("big") or {}  # type: ignore[attr-defined]
        profiled = ("; profiled (cProfile, inflated): " + ", ".join(f"{k} {v} s" for k, v in parts.items())
                    if parts else "")
        ratio_row("big-chunk file → dir ≤ 3× `cp`", big / cp, 3.0, f"{big / cp:.1f}× ({big} s against {cp} s)",
                  f"imports alone {imports} s ({imports / cp:.1f}× `cp`): imports + `cp` is "
                  f"{(imports + cp) / cp:.1f}× before a chunk moves{profiled}")
    cp_r, many = _seconds(rows, "many: cp -r of that output dir (file-creation limit)"), _seconds(
        rows, "many: nc2nczarr (direct) → dir")
    if cp_r and many and imports is not None:
        parts = (doc.get("profiles") or {}).get("many") or {}  # type: ignore[attr-defined]
        profiled = ("; profiled (cProfile, inflated): " + ", ".join(f"{k} {v} s" for k, v in parts.items())
                    if parts else "")
        ratio_row("many-chunk file → dir ≤ 1.0× `cp -r` of the output tree", many / cp_r, 1.0,
                  f"{many / cp_r:.1f}× ({many} s against {cp_r} s)",
                  f"`cp -r` pays no imports: imports + `cp -r` is {(imports + cp_r) / cp_r:.1f}× `cp -r`{profiled}")
    version = _seconds(rows, "nc2nczarr --version (startup)")
    if version is not None:
        ratio_row("`nc2nczarr --version`/`--help` < 0.15 s", version, 0.15, f"{version} s", "Python's start-up")
    concat = doc.get("concat")
    if isinstance(concat, dict) and isinstance(concat.get("many"), dict) and concat["many"]:
        info = concat["many"]
        targets = info["targets"]
        n = info["nfiles"]
        phases = info.get("phases_in_process") or {}
        whole, checks = phases.get("whole, in this process"), phases.get("check (describe each file)")
        writes = phases.get("write (each file's chunks, assembled rows)")
        per_file = f"; in process {whole} s: checks {checks} s, writes {writes} s" if phases else ""
        value = targets.get(f"{n} files: --concat (default) / (ncrcat + nc2nczarr) (target <= 1.0)")
        if value is not None:
            ratio_row(f"`--concat` of {n} daily files ≤ 1.0× `ncrcat` + `nc2nczarr`", float(value), 1.0, f"{value}×",
                      "each file is opened twice (checks, then writes: where its chunks go depends on every file) "
                      f"and scanned by h5py once; the cluster's start and close{per_file}")
        loop = targets.get(f"{n} files: append loop / --concat (default) (target >= 4)")
        if loop is not None:
            ratio_row(f"`--concat` of {n} files ≥ 4× faster than the append loop", float(loop), 4.0, f"{loop}×", "",
                      above=True)
    dump = doc.get("dump")
    if isinstance(dump, dict):
        floors = {r["job"]: r["seconds"] for r in dump.get("results", []) if "python -c" in r["job"]}
        for r in dump.get("results", []):
            if "ratio_to_ncdump" in r and "identical" in r:
                ratio_row(f"`nczarr-dump` ≤ 1.5× `ncdump` ({r['job'].split(':')[0]} values, byte-identical: "
                          f"{r['identical']})", float(r["ratio_to_ncdump"]), 1.5,
                          f"{r['ratio_to_ncdump']}× wall, {r['cpu_ratio_to_ncdump']}× CPU", "start-up and formatting")
            elif "ratio_to_ncdump" in r:  # the start-up rows (issue 37): a small store's header
                where = "a venv with nothing installed" if "venv" in r["job"] else "this environment's interpreter"
                ratio_row(f"`nczarr-dump -h` start-up ≤ 2× `ncdump -h` (a small store; {where})",
                          float(r["ratio_to_ncdump"]), 2.0, f"{r['ratio_to_ncdump']}× wall ({r['seconds']} s)",
                          "the interpreter's own start: " + ", ".join(f"`{k}` {v} s" for k, v in floors.items()))
    report = doc.get("report")
    if isinstance(report, dict) and isinstance(report.get("best"), dict):
        best = float(report["best"]["seconds"])
        spent = (report.get("profile") or {}).get("spent") or {}
        top = ", ".join(f"{k} {v[0]} s" for k, v in list(spent.items())[:4])
        ratio_row("a fresh `nczarr-conformance report` ≤ 20 s", best, 20.0, f"{best} s (best of {report['repeat']})",
                  f"thread time of the slowest readers: {top}")
    if not table:
        return ""
    lines = ["# Issue 26's targets (speed where users feel it)", "",
             f"From the sections below (generated {doc.get('generated', '?')}; a section rerun alone with `--only` "
             "keeps the others from the last full run).", "",
             "| target | this run | | what holds the gap (measured in the same run) |", "|---|---|---|---|"]
    lines += [f"| {t} | {v} | {m} | {g} |" for t, v, m, g in table]
    return "\n".join(lines) + "\n\n"


def render(doc: dict[str, object]) -> str:
    m = doc["machine"]
    lines = ["# nc2nczarr benchmark", "",
             (f"Generated {doc['generated']} by `python benchmarks/run.py`. Input: `precip(time=256 unlimited, "
             f"lat=480, lon=1440)` float32, chunks 8×480×1440, zlib level 1, {doc['input_mb']} MB, plus a time "
             "coordinate (and a fixed-time copy for nccopy); rows `many:` convert 20 variables (time=365, lat=128, "
             "lon=128) float32 in chunks of 1×128×128 (64 KiB), zlib 1 + shuffle, 7300 chunks, "
             f"{doc.get('many_mb', '?')} MB (make_reference.py)."), "",
             f"Machine: {m['cores']} cores, {m['cpu']}, {m['memory']}, Python {m['python']}; "
             + ", ".join(f"{k} {v}" for k, v in m["versions"].items()) + f", netcdf-c tools {m['netcdf_c_tools']}.", "",
             "| job | seconds | peak RSS (MB) | output (MB) | objects | exit |", "|---|---|---|---|---|---|"]
    for r in doc["results"]:
        message = (": " + r["message"]) if r.get("message") else ""
        lines.append(f"| {r['job']} | {r.get('seconds', '')} | {r.get('peak_rss_mb', '')} | {r.get('output_mb', '')} | "
                     f"{r.get('objects', '')} | {r.get('exit', '')}{message} |")
    rows = {r["job"]: r for r in doc["results"]}
    ours = rows.get("nc2nczarr (direct) fixed-dim → dir", {})
    ref = rows.get("nccopy 4.9.0 fixed-dim → nczarr dir", {})
    if ours.get("seconds") and ref.get("seconds"):
        lines += ["", (f"Targets: time ratio to nccopy on the fixed-dim file {ours['seconds'] / ref['seconds']:.2f}× "
                  "(target ≤ 0.6×, compression kept); peak RSS "
                  f"{max(r.get('peak_rss_mb', 0) for r in doc['results'] if r['job'].startswith('nc2nczarr'))} MB "
                  "for our runs (target < 300 MB); unlimited dimension converted (nccopy fails on it).")]
    cp_big, cp_many = rows.get("cp of the .nc (copy limit)", {}), rows.get("many: cp of the .nc (copy limit)", {})
    big, small = rows.get("nc2nczarr (direct chunk copy) → dir", {}), rows.get("many: nc2nczarr (direct) → dir", {})
    small_zip = rows.get("many: nc2nczarr (direct) → zip", {})
    nccopy_many = rows.get("many: nccopy 4.9.0 → nczarr dir", {})
    cp_r = rows.get("many: cp -r of that output dir (file-creation limit)", {})
    startup = rows.get("nc2nczarr --version (startup)", {})
    if all(r.get("seconds") for r in (cp_big, cp_many, big, small, small_zip, nccopy_many, cp_r)):
        lines += ["", ("Issue 16 targets (same run): big-chunk file → dir "
                  f"{big['seconds'] / cp_big['seconds']:.1f}× `cp` (target ≤ 2×); many-small-chunks file → dir "
                  f"{small['seconds'] / cp_many['seconds']:.1f}× `cp` of the .nc (target ≤ 3×) and "
                  f"{small['seconds'] / nccopy_many['seconds']:.2f}× nccopy (target ≤ 0.25×); → zip "
                  f"{small_zip['seconds'] / cp_many['seconds']:.1f}× `cp`. A directory store is one file per chunk: "
                  f"`cp -r` of the same 7300-file tree takes {cp_r['seconds']} s here, the floor for any directory "
                  f"writer on this file system; `nc2nczarr --version` {startup.get('seconds')} s (target < 0.15 s; "
                  "process wall time from spawn to exit).")]
        imports = rows.get("imports a conversion needs (numpy, numcodecs, netCDF4, h5py; the floor before the "
                           "first byte)", {})
        if imports.get("seconds"):
            floor = float(imports["seconds"]) + float(cp_big["seconds"])
            imports_and_cp_r = (float(imports["seconds"]) + float(cp_r["seconds"])) / float(cp_many["seconds"])
            lines += ["", "Where the copy-limit gap goes: the libraries a conversion needs take "
                      f"{imports['seconds']} s "
                      f"to import in this run, so imports + `cp` is already {floor:.2f} s "
                      f"({floor / float(cp_big['seconds']):.1f}× `cp`) on the big-chunk file before any chunk moves; "
                      "then one copied chunk per variable is decoded and compared with netCDF4's values (the "
                      "guarantee that a codec mismatch re-encodes: for one 22 MB chunk about 0.45 s, pyinstrument "
                      "profile of 2026-11-24: 0.28 s zlib + unshuffle, 0.18 s netCDF4 reading the slab, which "
                      "decompresses the whole HDF5 chunk), and the chunks are written through page cache from "
                      "Python threads (`cp` uses in-kernel `copy_file_range`). On many small chunks the file "
                      f"count is the floor: `cp -r` of the output tree alone takes "
                      f"{float(cp_r['seconds']) / float(cp_many['seconds']):.1f}× `cp` of the .nc, and imports "
                      f"+ `cp -r` {imports_and_cp_r:.1f}×."]
    for label in ("", "many: "):
        ours_s3 = rows.get(f"{label}nc2nczarr (direct) → s3 (moto server)", {})
        alone = [r for name, r in rows.items() if name.startswith(f"{label}boto3 alone") and r.get("exit") == 0]
        if ours_s3.get("seconds") and alone:
            fastest = min(alone, key=lambda r: float(r["seconds"]))
            lines += ["", (f"S3 ({label.rstrip(': ') or 'big-chunk file'}): nc2nczarr {ours_s3['seconds']} s against "
                      f"{fastest['seconds']} s for boto3 alone uploading the same objects (the faster of its two "
                      f"rows), {float(ours_s3['seconds']) / float(fastest['seconds']):.2f}× (target ≤ 1.3×); peak "
                      f"RSS {ours_s3.get('peak_rss_mb')} MB; CPU {ours_s3.get('cpu_seconds')} s against "
                      f"{fastest.get('cpu_seconds')} s (ours also reads, verifies and copies the chunks out of the "
                      ".nc). Both are bound by the moto server, which runs on the same cores.")]
            store = rows.get(f"{label}our S3 store alone: put() of that dir output (no conversion)", {})
            if store.get("seconds"):
                lines[-1] += (f" Our S3 store alone on the same objects: {store['seconds']} s, "
                              f"{float(store['seconds']) / float(fastest['seconds']):.2f}× boto3 alone.")
    lines += ["", ("The direct path reads each variable's HDF5 chunk index once (h5py `chunk_iter`) and copies "
              "each compressed chunk into the store as it is with `os.pread` in parallel threads, no HDF5 call "
              "and no lock per chunk; a sample of copied chunks per variable is decoded and compared with the "
              "source. HDF5's deflate and shuffle are Zarr's zlib and shuffle byte for byte. "
              "`--no-direct-copy` decompresses with netCDF4 and recompresses with numcodecs in a bounded thread "
              "pipeline; it is what runs when codecs differ.")]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ntime", type=int, default=256)
    ap.add_argument("--only", choices=("all", "s3", "concat", "dump", "report", "references", "read", "variables"),
                    default="all",
                    help="s3: the S3 rows alone; concat: the many-files rows alone (benchmarks/concat.py); "
                    "dump: nczarr-dump against ncdump alone (benchmarks/dump.py); report: a fresh "
                    "nczarr-conformance report alone (benchmarks/report.py); references: --concat --reference "
                    "against VirtualiZarr and kerchunk alone (benchmarks/references.py, also written whole to "
                    "reports/references-bench.*); read: our reader against zarr-python, TensorStore and netCDF4 "
                    "alone (benchmarks/read.py, written whole to reports/read.*); variables: 2,000 small variables "
                    "against nccopy and cp -r alone (benchmarks/variables.py); each put into the last full run's "
                    "reports/bench.*")
    ap.add_argument("--nfiles", type=int, default=200, help="daily files for the --concat rows")
    ap.add_argument("--nmany", type=int, default=500, help="daily files for the many-files rows (--concat against "
                    "ncrcat + nc2nczarr, the append loop, xarray); 0: none")
    ap.add_argument("--out", default=str(REPO / "reports"))
    args = ap.parse_args()
    out = Path(args.out)
    # the package's bytecode, as pip install writes it: an editable install under PYTHONDONTWRITEBYTECODE=1
    # (set here) would otherwise compile every module from source in each timed process (70-90 ms measured)
    compileall.compile_dir(str(REPO / "nczarr_conformance"), quiet=1)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    # the other sections stay as last written
    if args.only in ("dump", "concat", "report", "references", "read", "variables"):
        doc = json.loads((out / "bench.json").read_text()) if (out / "bench.json").exists() else {}
    else:
        doc = run(args.ntime, args.only)
    text = render(doc) if doc.get("results") else ""
    if args.only in ("all", "concat"):  # many files → one store: --concat, the append loop, xarray
        import concat as concat_bench

        with tempfile.TemporaryDirectory(prefix="concat-bench-") as work:
            doc["concat"] = concat_bench.run(args.nfiles, Path(work), args.nmany)
    if "concat" in doc:
        import concat as concat_bench

        text += "\n## Many files → one store\n\n" + concat_bench.render(doc["concat"])
    if args.only in ("all", "dump"):  # nczarr-dump against ncdump on the same store
        import dump as dump_bench

        with tempfile.TemporaryDirectory(prefix="dump-bench-") as work:
            doc["dump"] = dump_bench.run(Path(work))
    if "dump" in doc:
        import dump as dump_bench

        text += "\n## Dump: nczarr-dump against ncdump\n\n" + dump_bench.render(doc["dump"])
    if args.only in ("all", "variables"):  # 2,000 small variables: nc2nczarr, nccopy, cp -r (the creation floor)
        import variables as variables_bench

        with tempfile.TemporaryDirectory(prefix="variables-bench-") as work:
            doc["variables"] = variables_bench.run(Path(work))
    if "variables" in doc:
        import variables as variables_bench

        text += "\n## Many small variables\n\n" + variables_bench.render(doc["variables"])
    if args.only in ("all", "report"):  # a fresh nczarr-conformance report, its peers included
        import report as report_bench

        doc["report"] = report_bench.run()
    if "report" in doc:
        import report as report_bench

        text += "\n## The conformance report\n\n" + report_bench.render(doc["report"])
    if args.only in ("all", "references"):  # references of 500 daily files: ours, VirtualiZarr, kerchunk
        import references as references_bench

        references_bench.main(["--out", str(out / "references-bench.md")])
        doc["references"] = json.loads((out / "references-bench.json").read_text())
    if "references" in doc:
        import references as references_bench

        text += "\n## References of many daily files\n\n" + references_bench.render(doc["references"]).split(
            "\n", 2)[2]  # its own title dropped
    if args.only in ("all", "read"):  # reading: ours against zarr-python, TensorStore, netCDF4-python (issue 35)
        import read as read_bench

        read_bench.main(["--out", str(out / "read.json")])
    if (out / "read.json").exists():  # read.py's own last full run, whichever command ran it
        import read as read_bench

        doc["read"] = json.loads((out / "read.json").read_text())
        text += "\n## Reading: ours against zarr-python, TensorStore and netCDF4-python\n\n" + read_bench.render(
            doc["read"]).split("\n", 2)[2]  # its own title dropped
    text = issue26(doc) + text
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    (out / "bench.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
