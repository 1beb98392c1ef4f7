"""Benchmark ``nczarr-dump`` against ``ncdump`` 4.9.0 on the same NCZarr store, in one run (issue 26).

    python benchmarks/dump.py [--out FILE.json]     (benchmarks/run.py --only dump puts it in reports/)

Makes two float32 stores with our writer (``precip(time, lat=250, lon=250)``, 5M and 20M
values, chunks 1×250×250, zlib 1, flavor nczarr-2-upper so that ncdump 4.9.0 reads them;
rain-like values: a third zeros, a fill value here and there) in benchmarks/data, then times
each tool printing the whole store as CDL into a file, in turns, best of ``--repeat``; the two
outputs must be byte-identical (their SHA-256 is compared). ``--json`` of the 5M store is timed
too (no peer prints that), and a cProfile of our 5M dump says where our time goes.

Start-up (``--startup`` runs only this): ``nczarr-dump -h`` and ``ncdump -h`` on a small store (one
zlib-compressed variable of 12 values, four attributes), best of ``--startup-repeat`` each, beside ``python -c pass``
(the floor any Python command stands on) and ``python -c "import numpy"`` (what the full reader adds; ``-h`` of a
plain store does without it, cdl/quick_header.py). Both Python rows are measured twice: with this interpreter,
whose start includes whatever its environment's ``site-packages`` runs (``.pth`` files of editable installs,
certificate hooks), and with a venv that has nothing installed (``--without-pip``, the package on
``PYTHONPATH``), the interpreter's own start. Bytecode is cached (``PYTHONPYCACHEPREFIX`` in the work
directory, one warm-up run) even where the environment says ``PYTHONDONTWRITEBYTECODE``, so that the rows
measure what an installed package costs.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

NLAT = NLON = 250
SIZES = {"5M": 80, "20M": 320}  # time steps of 62,500 values
#: our functions whose cumulative time the profile row reports, by what they do
PHASES = {"read and decode chunks (StoreSource.slabs)": "slabs",
          "format values in line (ValueFormatter.items: numpy %g; a variable of one batch)": "items",
          "wait for the second thread's formatting of the next batch (Future.result)": "result",
          "line breaks (vardata.line_breaks)": "line_breaks",
          "pack separators and breaks into the output (vardata.pack)": "pack",
          "write to stdout": "_write"}


def make_store(path: Path, ntime: int) -> None:
    """The store, written by our writer once (kept in benchmarks/data), in a child process: the
    measured processes are forked from this one and their peak RSS counts its image at the fork."""
    if not (path / ".zgroup").exists():
        subprocess.run([sys.executable, __file__, "--make", str(path), str(ntime)], check=True)


def _make_store(path: Path, ntime: int) -> None:
    import numpy as np

    from nczarr_conformance.model import Attribute, Dataset, Dimension, Group, Variable
    from nczarr_conformance.nczarr.writer import write_dataset
    from nczarr_conformance.stores.directory import DirectoryStore

    rng = np.random.default_rng(26)
    rain = rng.gamma(0.5, 3.0, (ntime, NLAT, NLON)).astype("f4")
    rain[rng.random(rain.shape) < 0.33] = 0
    rain[rng.random(rain.shape) < 0.01] = -9999.0
    root = Group(dimensions={"time": Dimension(ntime), "lat": Dimension(NLAT), "lon": Dimension(NLON)})
    root.variables["precip"] = Variable(
        "float", ["/time", "/lat", "/lon"], rain.shape,
        {"units": Attribute("char", "mm/h"), "_FillValue": Attribute("float", np.array([-9999.0], dtype="f4"))},
        rain, chunks=[1, NLAT, NLON], filters=[{"id": "zlib", "level": 1}])
    partial = path.with_suffix(".partial")
    with DirectoryStore(partial, "w") as store:
        write_dataset(Dataset(root), store, flavor="nczarr-2-upper")
    partial.rename(path)


def _make_small_store(path: Path) -> None:
    import numpy as np

    from nczarr_conformance.model import Attribute, Dataset, Dimension, Group, Variable
    from nczarr_conformance.nczarr.writer import write_dataset
    from nczarr_conformance.stores.directory import DirectoryStore

    root = Group(dimensions={"x": Dimension(12)}, attributes={"title": Attribute("char", "start-up")})
    root.variables["v"] = Variable("float", ["/x"], (12,), {
        "units": Attribute("char", "m"), "long_name": Attribute("char", "a small variable"),
        "valid_range": Attribute("float", np.array([0, 100], dtype="f4"))}, np.arange(12, dtype="f4"),
        filters=[{"id": "zlib", "level": 1}])
    with DirectoryStore(path, "w") as store:
        write_dataset(Dataset(root), store, flavor="nczarr-2-upper")


def startup(work: Path, repeat: int = 10) -> list[dict[str, object]]:
    """``-h`` of a small store: each command's best of ``repeat`` (after a warm-up run), and the Python floor."""
    store = work / "small.file"
    if not (store / ".zgroup").exists():
        subprocess.run([sys.executable, __file__, "--make-small", str(store)], check=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent), env.get("PYTHONPATH")]))
    bare = work / "bare-venv"
    if not (bare / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    bare_python = str(bare / "bin" / "python")
    dump = ["-m", "nczarr_conformance.cli.dump", "-h", str(store)]
    jobs = {"small store: ncdump -h": ["ncdump", "-h", f"file://{store}#mode=nczarr,file"],
            "small store: nczarr-dump -h": [sys.executable, *dump],
            "small store: nczarr-dump -h (a venv with nothing installed)": [bare_python, *dump],
            "python -c pass (the interpreter's start)": [sys.executable, "-c", "pass"],
            "python -c pass (a venv with nothing installed)": [bare_python, "-c", "pass"],
            "python -c 'import numpy' (what the full reader needs)": [sys.executable, "-c", "import numpy"]}
    rows = []
    for job, cmd in jobs.items():
        measure_to(cmd, work / "startup.out", env)  # warm-up: bytecode written, files in the page cache
        rows.append({"job": job, **_best([measure_to(cmd, work / "startup.out", env) for _ in range(repeat)]),
                     "note": f"best of {repeat}, bytecode cached"})
    theirs = rows[0]
    for ours in rows[1:3]:
        ours["ratio_to_ncdump"] = round(float(str(ours["seconds"])) / max(0.001, float(str(theirs["seconds"]))), 1)
        ours["cpu_ratio_to_ncdump"] = round(float(str(ours["cpu_seconds"]))
                                            / max(0.001, float(str(theirs["cpu_seconds"]))), 1)
    return rows


def measure_to(cmd: list[str], out: Path, env: dict[str, str] | None = None) -> dict[str, object]:
    """Wall time, CPU and peak RSS of ``cmd`` writing its stdout into ``out``."""
    started = time.perf_counter()
    with out.open("wb") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.PIPE, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    stderr = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    return {"seconds": round(seconds, 3), "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 3),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1), "exit": code,
            "message": "" if code == 0 else stderr.strip().splitlines()[-1][:200] if stderr.strip() else "signal",
            "output_mb": round(out.stat().st_size / 1e6, 1)}


def digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _best(runs: list[dict[str, object]]) -> dict[str, object]:
    ok = [r for r in runs if r["exit"] == 0]
    return min(ok, key=lambda r: float(str(r["seconds"]))) if ok else runs[-1]


def compare(label: str, store: Path, work: Path, repeat: int) -> list[dict[str, object]]:
    """ncdump and nczarr-dump on ``store``, in turns; the best of each, their ratio, the outputs' equality."""
    url = f"file://{store}#mode=nczarr,file"
    ours_cmd = [sys.executable, "-m", "nczarr_conformance.cli.dump", "-n", store.stem, str(store)]
    theirs_cmd = ["ncdump", url]
    runs: dict[str, list[dict[str, object]]] = {"ncdump": [], "ours": []}
    for _ in range(repeat):
        runs["ncdump"].append(measure_to(theirs_cmd, work / f"{label}.ncdump.cdl"))
        runs["ours"].append(measure_to(ours_cmd, work / f"{label}.ours.cdl"))
    same = digest(work / f"{label}.ncdump.cdl") == digest(work / f"{label}.ours.cdl")
    theirs, ours = _best(runs["ncdump"]), _best(runs["ours"])
    ratio = float(str(ours["seconds"])) / float(str(theirs["seconds"]))
    cpu_ratio = float(str(ours["cpu_seconds"])) / max(0.01, float(str(theirs["cpu_seconds"])))
    note = f"best of {repeat}, in turns; output byte-identical to ncdump's: {same}"
    return [{"job": f"{label}: ncdump 4.9.0 → CDL file", **theirs, "note": note},
            {"job": f"{label}: nczarr-dump → CDL file", **ours, "note": note, "ratio_to_ncdump": round(ratio, 2),
             "cpu_ratio_to_ncdump": round(cpu_ratio, 2), "identical": same}]


def profile(store: Path, work: Path) -> dict[str, float]:
    """Cumulative seconds of our dump's phases (cProfile, so each a little inflated) and the total."""
    stats = work / "dump.pstats"
    with (work / "profiled.cdl").open("wb") as sink:
        subprocess.run([sys.executable, "-m", "cProfile", "-o", str(stats), "-m", "nczarr_conformance.cli.dump",
                        str(store)], stdout=sink, check=True)
    table = pstats.Stats(str(stats)).stats  # type: ignore[attr-defined]
    out: dict[str, float] = {}
    for phase, func in PHASES.items():
        out[phase] = round(sum(v[3] for k, v in table.items() if k[2] == func), 2)
    out["whole run (imports included)"] = round(max(v[3] for v in table.values()), 2)
    return out


def run(work: Path, repeat: int = 2) -> dict[str, object]:
    data = HERE / "data"
    data.mkdir(exist_ok=True)
    rows: list[dict[str, object]] = []
    load_before = os.getloadavg()[0]
    for label, ntime in SIZES.items():
        store = data / f"dump_{label}.file"
        make_store(store, ntime)
        rows += compare(label, store, work, repeat)
    store5 = data / "dump_5M.file"
    url5 = f"file://{store5}#mode=nczarr,file"
    for job, cmd in (("5M: ncdump -h (start-up and header, no data)", ["ncdump", "-h", url5]),
                     ("5M: nczarr-dump -h (start-up and header, no data)",
                      [sys.executable, "-m", "nczarr_conformance.cli.dump", "-h", str(store5)])):
        rows.append({"job": job, **_best([measure_to(cmd, work / "header.cdl") for _ in range(repeat)]),
                     "note": f"best of {repeat}"})
    rows.append({"job": "5M: nczarr-dump --json → file", **measure_to(
        [sys.executable, "-m", "nczarr_conformance.cli.dump", "--json", str(store5)], work / "5M.json"),
        "note": "no peer prints the canonical model"})
    rows += startup(work)
    return {"results": rows, "profile_5M": profile(store5, work), "load_before": round(load_before, 1),
            "load_after": round(os.getloadavg()[0], 1)}


def render(doc: dict[str, object]) -> str:
    lines = [(f"Dump benchmark: float32 `precip(time, lat={NLAT}, lon={NLON})` stores of 5M and 20M values "
              "written by our writer (nczarr-2-upper, chunks 1×250×250, zlib 1), printed whole as CDL into a "
              f"file (load average before {doc['load_before']}, after {doc['load_after']})."), "",
             "| job | s | CPU s | peak RSS MB | out MB | exit | ratio to ncdump (wall / CPU) |",
             "|---|---|---|---|---|---|---|"]
    for r in doc["results"]:  # type: ignore[attr-defined]
        ratio = f"{r['ratio_to_ncdump']} / {r['cpu_ratio_to_ncdump']}" if "ratio_to_ncdump" in r else ""
        lines.append(f"| {r['job']} | {r['seconds']} | {r['cpu_seconds']} | {r['peak_rss_mb']} | {r['output_mb']} | "
                     f"{r['exit']} {r.get('message') or ''} | {ratio} |")
    rows = {r["job"]: r for r in doc["results"]}  # type: ignore[attr-defined]
    lines.append("")
    for r in doc["results"]:  # type: ignore[attr-defined]
        if "ratio_to_ncdump" in r and "identical" in r:
            lines.append(f"- {r['job'].split(':')[0]}: nczarr-dump {r['ratio_to_ncdump']}× ncdump's wall time "
                         f"(target ≤ 1.5×), {r['cpu_ratio_to_ncdump']}× its CPU; byte-identical: {r['identical']}")
        elif "ratio_to_ncdump" in r:
            lines.append(f"- {r['job']}: {r['ratio_to_ncdump']}× ncdump -h's wall time (target ≤ 2×), "
                         f"{r['cpu_ratio_to_ncdump']}× its CPU")
    ours_h = rows.get("5M: nczarr-dump -h (start-up and header, no data)", {})
    theirs_h = rows.get("5M: ncdump -h (start-up and header, no data)", {})
    ours5, theirs5 = rows.get("5M: nczarr-dump → CDL file", {}), rows.get("5M: ncdump 4.9.0 → CDL file", {})
    if all(r.get("seconds") for r in (ours_h, theirs_h, ours5, theirs5)):
        data_ratio = ((float(ours5["seconds"]) - float(ours_h["seconds"]))
                      / max(0.01, float(theirs5["seconds"]) - float(theirs_h["seconds"])))
        lines.append(f"- start-up: `nczarr-dump -h` takes {ours_h['seconds']} s (Python's start, the header's JSON), "
                     f"`ncdump -h` {theirs_h['seconds']} s; the data alone (each run less its -h run) is "
                     f"{data_ratio:.2f}× ncdump's at 5M values, so a smaller store's ratio is mostly start-up")
    lines += ["", "Where our 5M dump's time goes (cProfile, cumulative seconds of the main thread; profiling inflates "
              "each). A variable of more than one batch has its next batch formatted on a second thread while the "
              "main thread lays out and writes the current one (cdl/vardata.py `_FormatAhead`): the wall time is "
              "below the CPU time, and the formatting shows here only as the main thread's wait for it.", ""]
    for phase, seconds in doc["profile_5M"].items():  # type: ignore[attr-defined]
        lines.append(f"- {phase}: {seconds}")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--make", nargs=2, metavar=("PATH", "NTIME"), help=argparse.SUPPRESS)
    p.add_argument("--make-small", metavar="PATH", help=argparse.SUPPRESS)
    p.add_argument("--startup", action="store_true", help="only the start-up rows (-h of a small store)")
    p.add_argument("--startup-repeat", type=int, default=10)
    p.add_argument("--out", help="write the JSON here (reports/ is regenerated by benchmarks/run.py --only dump)")
    args = p.parse_args()
    if args.make:
        _make_store(Path(args.make[0]), int(args.make[1]))
        return
    if args.make_small:
        _make_small_store(Path(args.make_small))
        return
    if args.startup:
        with tempfile.TemporaryDirectory(prefix="dump-startup-") as work:
            rows = startup(Path(work), args.startup_repeat)
        print(json.dumps(rows, indent=1))
        return
    with tempfile.TemporaryDirectory(prefix="dump-bench-") as work:
        doc = run(Path(work), args.repeat)
    text = render(doc)
    print(text)
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
