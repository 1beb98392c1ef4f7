"""References of many daily files: ours against VirtualiZarr and kerchunk, then a month read (issue 36 item 4).

    python benchmarks/references.py [--files 500] [--workdir DIR] [--repeat 1] [--out reports/references-bench.md]

Makes ``--files`` daily netCDF-4 files once in ``--workdir`` (``tas(time=1 unlimited, lat=180, lon=360)``
float32, zlib 1, chunk 1×180×360; ``time`` chunk 1, ``lat``/``lon`` coordinates), then writes one kerchunk
JSON reference store over all of them with:

* ours: ``nc2nczarr --concat time --reference 'DIR/day*.nc' OUT.json`` (the command as users run it);
* VirtualiZarr 2.8.0: ``open_virtual_mfdataset(files, parser=HDFParser(), combine="nested",
  concat_dim="time")`` then ``.vz.to_kerchunk(OUT, format="json")``, from its own venv
  (``~/.cache/nczarr-virtualizarr``, Python 3.13: VirtualiZarr 2.8 needs Python ≥ 3.12); "not installed"
  without it;
* kerchunk 0.2.10: ``SingleHdf5ToZarr`` per file, then ``MultiZarrToZarr(concat_dims=["time"],
  identical_dims=["lat", "lon"])``, in this Python.

Then reads one month (the first 30 time steps of ``tas``) through each reference store with xarray
(``engine="zarr"`` over fsspec's reference filesystem, VirtualiZarr's store in its venv), against
reading the 30 original files with ``xr.open_mfdataset(engine="netcdf4")``. Every trial is a fresh
interpreter: its time is the child's wall clock from start to exit (imports included, as a user waits
for them), best of ``--repeat``; its peak RSS is the child's ``ru_maxrss`` (``wait4``). The month's
values are compared by a digest. Writes the markdown report and its ``.json`` beside it. Not a timed test.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from run import machine  # noqa: E402  (benchmarks/ is not a package)

NLAT, NLON = 180, 360
MONTH = 30
VENV_PYTHON = Path.home() / ".cache" / "nczarr-virtualizarr" / "bin" / "python"

VIRTUALIZARR = r'''
import sys, warnings
warnings.simplefilter("ignore")
from obstore.store import LocalStore
from virtualizarr import open_virtual_mfdataset
from virtualizarr.parsers import HDFParser
try:
    from obspec_utils.registry import ObjectStoreRegistry
except ImportError:
    from virtualizarr.registry import ObjectStoreRegistry
files, out = sys.argv[1:-1], sys.argv[-1]
registry = ObjectStoreRegistry({"file://": LocalStore()})
ds = open_virtual_mfdataset([f"file://{f}" for f in files], registry=registry, parser=HDFParser(),
                            combine="nested", concat_dim="time", coords="minimal", compat="override")
ds.vz.to_kerchunk(out, format="json")
'''

KERCHUNK = r'''
import json, sys, warnings
warnings.simplefilter("ignore")
from kerchunk.combine import MultiZarrToZarr
from kerchunk.hdf import SingleHdf5ToZarr
files, out = sys.argv[1:-1], sys.argv[-1]
singles = []
for f in files:
    with open(f, "rb") as fh:
        singles.append(SingleHdf5ToZarr(fh, f, inline_threshold=0).translate())
combined = MultiZarrToZarr(singles, concat_dims=["time"], identical_dims=["lat", "lon"]).translate()
with open(out, "w") as fh:
    json.dump(combined, fh)
'''

# read one month: argv = kind ("refs" or "files"), then the reference JSON or the files
READ = r'''
import hashlib, json, sys, warnings
warnings.simplefilter("ignore")
import numpy as np, xarray as xr
kind, rest = sys.argv[1], sys.argv[2:]
if kind == "refs":
    ds = xr.open_dataset("reference://", engine="zarr", chunks=None,
                         backend_kwargs={"storage_options": {"fo": rest[0]}, "consolidated": False})
    values = ds["tas"].isel(time=slice(0, MONTH)).values
else:
    ds = xr.open_mfdataset(rest, engine="netcdf4", combine="nested", concat_dim="time", parallel=False)
    values = ds["tas"].values
values = np.ascontiguousarray(values, dtype="<f4")
print(json.dumps({"digest": hashlib.sha256(values.tobytes()).hexdigest()[:16], "shape": list(values.shape)}))
'''.replace("MONTH", str(MONTH))


def make_files(where: Path, n: int) -> list[Path]:
    """``n`` daily files (made once: kept when the workdir already holds them)."""
    import netCDF4
    import numpy as np

    where.mkdir(parents=True, exist_ok=True)
    files = [where / f"day{d:04d}.nc" for d in range(n)]
    missing = [(d, f) for d, f in enumerate(files) if not f.exists()]
    rng = np.random.default_rng(36)
    lat = np.linspace(-89.5, 89.5, NLAT, dtype="f4")
    lon = np.linspace(0.5, 359.5, NLON, dtype="f4")
    for d, path in missing:
        tmp = path.with_suffix(".tmp")
        with netCDF4.Dataset(tmp, "w") as ds:
            ds.title = "daily mean near-surface air temperature"
            ds.createDimension("time", None)
            ds.createDimension("lat", NLAT)
            ds.createDimension("lon", NLON)
            t = ds.createVariable("time", "f8", ("time",), chunksizes=(1,))
            t.units, t.calendar = "days since 2000-01-01", "standard"
            ds.createVariable("lat", "f4", ("lat",))[:] = lat
            ds.createVariable("lon", "f4", ("lon",))[:] = lon
            tas = ds.createVariable("tas", "f4", ("time", "lat", "lon"), zlib=True, complevel=1,
                                    chunksizes=(1, NLAT, NLON))
            tas.units = "K"
            t[0] = float(d)
            tas[0] = np.round(250 + 30 * rng.random((NLAT, NLON), dtype="f4"), 2)
        os.replace(tmp, path)
    return files


def trial(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """One fresh process: wall seconds, peak RSS in MB (wait4's ru_maxrss), exit, the JSON of its last line."""
    started = time.perf_counter()
    with open(os.devnull, "wb") as devnull:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=devnull,
                                env={**os.environ, **(env or {})})
        out = proc.stdout.read() if proc.stdout else b""
        err = proc.stderr.read() if proc.stderr else b""
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    result: dict[str, Any] = {"seconds": round(seconds, 2), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
                              "exit": code}
    if code != 0:
        result["message"] = " / ".join(err.decode("utf-8", "replace").strip().splitlines()[-2:])[:300]
    lines = out.decode("utf-8", "replace").strip().splitlines()
    if code == 0 and lines:
        with contextlib.suppress(json.JSONDecodeError):
            result.update(json.loads(lines[-1]))
    return result


def best(cmd: list[str], repeat: int, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The fastest of ``repeat`` trials (the first failure as it is)."""
    runs = []
    for _ in range(repeat):
        got = trial(cmd, env)
        if got["exit"] != 0:
            return got
        runs.append(got)
    return min(runs, key=lambda r: r["seconds"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=500)
    ap.add_argument("--workdir", type=Path, default=REPO / "benchmarks" / "data" / "references")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out", type=Path, default=REPO / "reports" / "references-bench.md")
    args = ap.parse_args(argv)

    daily = args.workdir / f"daily-{args.files}"
    files = make_files(daily, args.files)
    names = [str(f) for f in files]
    refs_dir = args.workdir / f"refs-{args.files}"
    refs_dir.mkdir(parents=True, exist_ok=True)
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")]))}
    has_venv = VENV_PYTHON.exists()

    writers: dict[str, dict[str, Any]] = {}
    outputs = {"ours": refs_dir / "ours.json", "virtualizarr": refs_dir / "virtualizarr.json",
               "kerchunk": refs_dir / "kerchunk.json"}
    for out in outputs.values():
        out.unlink(missing_ok=True)
    commands: dict[str, list[str] | None] = {
        "ours": [sys.executable, "-m", "nczarr_conformance.cli.convert", "--concat", "time", "--reference", "-q",
                 str(daily / "day*.nc"), str(outputs["ours"]), "--overwrite"],
        "virtualizarr": [str(VENV_PYTHON), "-c", VIRTUALIZARR, *names, str(outputs["virtualizarr"])]
        if has_venv else None,
        "kerchunk": [sys.executable, "-c", KERCHUNK, *names, str(outputs["kerchunk"])],
    }
    for name, cmd in commands.items():
        if cmd is None:
            writers[name] = {"status": "not installed"}
            continue
        print(f"writing references: {name}", file=sys.stderr)
        got = best(cmd, args.repeat, env)
        got["size_bytes"] = outputs[name].stat().st_size if outputs[name].exists() else None
        writers[name] = got

    readers: dict[str, dict[str, Any]] = {}
    month = names[:MONTH]
    for name, out in outputs.items():
        if writers[name].get("exit") != 0:
            readers[name] = {"status": "no references"}
            continue
        python = str(VENV_PYTHON) if name == "virtualizarr" else sys.executable
        print(f"reading a month: {name}", file=sys.stderr)
        readers[name] = best([python, "-c", READ, "refs", str(out)], args.repeat, env)
    print("reading a month: netCDF4 files", file=sys.stderr)
    readers["netCDF4 files (open_mfdataset)"] = best([sys.executable, "-c", READ, "files", *month], args.repeat, env)
    digests = {r.get("digest") for r in readers.values() if r.get("digest")}

    report = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "machine": machine(),
              "files": args.files, "grid": [1, NLAT, NLON], "month": min(MONTH, args.files),
              "input_bytes": sum(f.stat().st_size for f in files), "repeat": args.repeat,
              "writers": writers, "readers": readers, "values_agree": len(digests) == 1}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    args.out.write_text(render(report))
    print(args.out.read_text())
    return 0


def _cell(r: dict[str, Any], key: str, fmt: str) -> str:
    return format(r[key], fmt) if r.get("exit") == 0 and r.get(key) is not None else "–"


def render(report: dict[str, Any]) -> str:
    """The markdown report."""
    w, r = report["writers"], report["readers"]
    ours = w.get("ours", {})
    lines = [
        "# References of many daily files (issue 36 item 4)",
        "",
        f"{report['files']} daily netCDF-4 files, `tas` 1×{report['grid'][1]}×{report['grid'][2]} float32 zlib 1, "
        f"{report['input_bytes'] / 1e6:.1f} MB in all; one kerchunk JSON reference store over all of them. "
        f"Each trial a fresh process (imports included), best of {report['repeat']}; peak RSS is the process's "
        f"`ru_maxrss`. Made by `benchmarks/references.py` on {report['date']}.",
        "",
        "| writer | seconds | peak RSS (MB) | references (bytes) | ours faster by |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, got in w.items():
        if got.get("exit") != 0:
            lines.append(f"| {name} | {got.get('status') or got.get('message', 'failed')} | | | |")
            continue
        ratio = (f"{got['seconds'] / ours['seconds']:.2f}×" if name != "ours" and ours.get("exit") == 0 else "")
        lines.append(f"| {name} | {got['seconds']:.2f} | {got['peak_rss_mb']:.0f} | {got['size_bytes']} | {ratio} |")
    lines += ["", f"Reading one month (`tas[:{report['month']}]`) with xarray:", "",
              "| through | seconds | peak RSS (MB) | values digest |", "|---|---:|---:|---|"]
    for name, got in r.items():
        if got.get("exit") != 0:
            lines.append(f"| {name} | {got.get('status') or got.get('message', 'failed')} | | |")
            continue
        lines.append(f"| {name} | {got['seconds']:.2f} | {got['peak_rss_mb']:.0f} | `{got.get('digest')}` |")
    lines += ["", f"Every reader read the same values: {'yes' if report['values_agree'] else 'NO'}.", "",
              f"Machine: {json.dumps(report['machine'])}", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
