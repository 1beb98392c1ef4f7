"""obstore against fsspec (and our boto3 S3Store) on a moto S3 server and a plain HTTP server (issue 23).

    python benchmarks/remote_stores.py [--repeat 5] [--out reports/remote-stores.json]

Writes a 100-chunk NCZarr store (one float32 variable 100×64×64, chunks 1×64×64, zlib 1,
consolidated), serves it from a moto server (through a counting proxy, bucket public-read by
policy) and from Python's ``http.server`` on 127.0.0.1, and times, each trial as its own process:
import of the library, making the store/filesystem, "open" (GET ``.zmetadata``) and reading all
100 chunks, one GET at a time as our ``Store.get`` does (``seq``) and all at once with the
library's own concurrency (``batch``). The servers count requests and bytes sent (status line,
headers and body). Prints a markdown table and the JSON (``--out``). Not a timed test.
"""
from __future__ import annotations

import argparse
import http.server
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

NCHUNKS = 100

# Each trial runs in a fresh interpreter: argv = library, kind ("s3" or "http"), base URL, mode ("seq"/"batch").
TRIAL = r'''
import json, sys, time
t0 = time.perf_counter()
lib, kind, base, mode, endpoint = sys.argv[1:6]
keys = [".zmetadata"] + [f"v/{i}.0.0" for i in range(100)]
if lib == "obstore":
    import obstore
    from obstore.store import HTTPStore, S3Store
    t1 = time.perf_counter()
    if kind == "http":
        store = HTTPStore.from_url(base, client_options={"allow_http": True})
    else:
        bucket, _, prefix = base.partition("/")
        store = S3Store(bucket, prefix=prefix, endpoint=endpoint, region="us-east-1", skip_signature=True,
                        client_options={"allow_http": True})
    get = lambda k: bytes(obstore.get(store, k).bytes())
    def batch(ks):
        import asyncio
        async def one(k):
            return bytes(await (await obstore.get_async(store, k)).bytes_async())
        async def every():
            return await asyncio.gather(*(one(k) for k in ks))
        return asyncio.run(every())
elif lib == "fsspec":
    import fsspec
    t1 = time.perf_counter()
    if kind == "http":
        fs = fsspec.filesystem("http")
        root = base
    else:
        fs = fsspec.filesystem("s3", anon=True, client_kwargs={"endpoint_url": endpoint, "region_name": "us-east-1"})
        root = base
    get = lambda k: fs.cat_file(f"{root}/{k}")
    batch = lambda ks: list(fs.cat([f"{root}/{k}" for k in ks]).values())
else:  # boto3, signed: what our S3Store does today
    import boto3
    t1 = time.perf_counter()
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    bucket, _, prefix = base.partition("/")
    get = lambda k: client.get_object(Bucket=bucket, Key=f"{prefix}/{k}")["Body"].read()
    def batch(ks):
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(16) as pool:
            return list(pool.map(get, ks))
t2 = time.perf_counter()
meta = get(keys[0])
t3 = time.perf_counter()
if mode == "seq":
    chunks = [get(k) for k in keys[1:]]
else:
    chunks = batch(keys[1:])
t4 = time.perf_counter()
assert len(chunks) == 100 and all(chunks) and meta
print(json.dumps({"import_s": t1 - t0, "make_s": t2 - t1, "open_s": t3 - t2, "read_s": t4 - t3,
                  "total_s": t4 - t0, "payload": len(meta) + sum(map(len, chunks))}))
'''


class Counter:
    """Requests and bytes a server sent (status line, headers, body)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.bytes = 0

    def add(self, sent: int) -> None:
        with self.lock:
            self.requests += 1
            self.bytes += sent

    def take(self) -> tuple[int, int]:
        with self.lock:
            out, self.requests, self.bytes = (self.requests, self.bytes), 0, 0
        return out


class _CountingWriter:
    def __init__(self, raw: Any, box: list[int]) -> None:
        self.raw, self.box = raw, box

    def write(self, data: bytes) -> int:
        self.box[0] += len(data)
        return int(self.raw.write(data))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def serve_directory(root: Path, counter: Counter, port: int = 0) -> http.server.ThreadingHTTPServer:
    """``root`` over HTTP/1.1 on 127.0.0.1 (``port``, or a free one), each response counted; served by a thread."""

    class Handler(http.server.SimpleHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in separate writes: no 40 ms delayed-ACK stall

        def log_message(self, *args: object) -> None:
            pass

        def handle_one_request(self) -> None:
            box = [0]
            raw, self.wfile = self.wfile, _CountingWriter(self.wfile, box)
            try:
                super().handle_one_request()
            finally:
                self.wfile = raw
                if box[0]:
                    counter.add(box[0])

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), partial(Handler, directory=str(root)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def make_store(tmp: Path) -> Path:
    import netCDF4
    import numpy as np

    from nczarr_conformance.access.api import convert

    nc = tmp / "bench.nc"
    with netCDF4.Dataset(nc, "w") as ds:
        ds.createDimension("t", NCHUNKS)
        ds.createDimension("y", 64)
        ds.createDimension("x", 64)
        var = ds.createVariable("v", "f4", ("t", "y", "x"), chunksizes=(1, 64, 64), zlib=True, complevel=1)
        rng = np.random.default_rng(0)
        var[:] = np.round(rng.normal(size=(NCHUNKS, 64, 64)), 2).astype("f4")
    out = tmp / "bench.file"
    convert(str(nc), str(out))
    return out


def upload(root: Path, endpoint: str, bucket: str) -> None:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    client.create_bucket(Bucket=bucket)
    # AWS authorizes HEAD with s3:GetObject; moto asks for an "s3:HeadObject" action (s3fs HEADs before a GET)
    allow = {"Effect": "Allow", "Principal": "*", "Action": ["s3:GetObject", "s3:HeadObject"],
             "Resource": f"arn:aws:s3:::{bucket}/*"}
    policy = {"Version": "2012-10-17", "Statement": [allow]}
    client.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))
    for path in root.rglob("*"):
        if path.is_file():
            client.put_object(Bucket=bucket, Key=f"ds/{path.relative_to(root).as_posix()}", Body=path.read_bytes())


def import_cost(code: str, repeat: int) -> float:
    """Median seconds for a fresh interpreter to run ``code`` minus one that runs nothing."""
    def run(snippet: str) -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", snippet], check=True)
        return time.perf_counter() - started
    base = statistics.median(run("pass") for _ in range(repeat))
    return statistics.median(run(code) for _ in range(repeat)) - base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from moto.server import ThreadedMotoServer

    sys.path.insert(0, str(REPO / "tests" / "stores"))
    from faulty_s3 import FaultyS3

    s3_count = Counter()

    class CountingS3(FaultyS3):
        def handle(self, req: Any) -> None:
            box = [0]
            raw, req.wfile = req.wfile, _CountingWriter(req.wfile, box)
            try:
                super().handle(req)
            finally:
                req.wfile = raw
                s3_count.add(box[0])

    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    moto_url = f"http://{host}:{port}"
    proxy = CountingS3(moto_url)
    proxy.server.RequestHandlerClass.disable_nagle_algorithm = True  # type: ignore[attr-defined]
    http_count = Counter()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = make_store(Path(tmp))
        upload(store, moto_url, "bench")
        web = serve_directory(Path(tmp), http_count)
        http_base = f"http://127.0.0.1:{web.server_port}/bench.file"
        cells = [("obstore", "http"), ("fsspec", "http"), ("obstore", "s3"), ("fsspec", "s3"), ("boto3", "s3")]
        for lib, kind in cells:
            for mode in ("seq", "batch"):
                trials = []
                for _ in range(args.repeat):
                    base = http_base if kind == "http" else "bench/ds"
                    done = subprocess.run([sys.executable, "-c", TRIAL, lib, kind, base, mode, proxy.url],
                                          capture_output=True, text=True, check=False)
                    if done.returncode:
                        raise SystemExit(f"{lib} {kind} {mode}: {done.stderr.strip().splitlines()[-1]}")
                    counter = http_count if kind == "http" else s3_count
                    requests, sent = counter.take()
                    trials.append({**json.loads(done.stdout), "requests": requests, "bytes_sent": sent})
                row = {"library": lib, "server": kind, "mode": mode, "trials": len(trials)}
                for name in ("import_s", "make_s", "open_s", "read_s", "total_s"):
                    row[name] = round(statistics.median(t[name] for t in trials), 4)
                for name in ("requests", "bytes_sent", "payload"):
                    row[name] = trials[-1][name]
                rows.append(row)
                print(json.dumps(row), file=sys.stderr)
        web.shutdown()
    proxy.close()
    moto.stop()
    imports = {
        "obstore": import_cost("import obstore; from obstore.store import HTTPStore, S3Store", args.repeat),
        "fsspec http": import_cost("import fsspec; fsspec.filesystem('http')", args.repeat),
        "fsspec s3 (s3fs)": import_cost("import fsspec; fsspec.filesystem('s3', anon=True)", args.repeat),
        "boto3": import_cost("import boto3; boto3.client('s3', region_name='us-east-1')", args.repeat),
    }
    doc = {"rows": rows, "import_seconds": {k: round(v, 3) for k, v in imports.items()}}
    print(render(doc))
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1) + "\n")


def render(doc: dict[str, Any]) -> str:
    lines = ["| library | server | reads | import s | open s | 100 chunks s | total s | requests | bytes sent |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        lines.append(f"| {r['library']} | {r['server']} | {r['mode']} | {r['import_s']:.3f} | {r['open_s']:.3f} | "
                     f"{r['read_s']:.3f} | {r['total_s']:.3f} | {r['requests']} | {r['bytes_sent']} |")
    lines += ["", "| import + make a client | seconds |", "|---|---|"]
    lines += [f"| {k} | {v:.3f} |" for k, v in doc["import_seconds"].items()]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
