"""nczarr-fix in place never makes a store worse (#20 items 1, 7, 8, 9, 10, 17b and the reader check).

Expected values come from the peers: the records an append adds are read back with netCDF4-python
and compared with the input files; what zarr-python reads after a fix is compared with what it (or
netCDF4-python) read before. Races and signals are tried a bounded number of times, and every try
must hold.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from nczarr_conformance import safety
from tests.fix.helpers import c410, nc_read, snapshot, url, zarray

pytestmark = pytest.mark.peer


def run(*args: str, cwd: Path | None = None, preexec: Callable[[], None] | None = None) \
        -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.fix", *args], capture_output=True, text=True,
                          check=False, timeout=180, cwd=cwd, preexec_fn=preexec,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def contents(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by relative path: its bytes (a zip: its members)."""
    if root.is_file():
        with zipfile.ZipFile(root) as zf:
            return {i.filename: zf.read(i) for i in zf.infolist()}
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ---- item 7: the consolidate fix honours the writer's rule -------------------------------------------
def zarr_reads(path: Path, names: list[str]) -> dict[str, object]:
    """What zarr-python 3 reads of each array: its values, or that it refused."""
    zarr = pytest.importorskip("zarr")
    try:
        group = zarr.open_group(str(path), mode="r", zarr_format=2)
    except Exception as exc:  # zarr-python refuses with ValueError, TypeError, KeyError…
        return {n: f"group refused: {type(exc).__name__}" for n in names}
    out: dict[str, object] = {}
    for name in names:
        try:
            out[name] = group[name][...].tolist()
        except Exception as exc:  # as above
            out[name] = f"refused: {type(exc).__name__}"
    return out


def _nan_fill_on_int(store: Path, spelled: bool) -> None:
    text = (store / "i" / ".zarray").read_text()
    doc = json.loads(text)
    new = text.replace(f'"fill_value": {doc["fill_value"]}', '"fill_value": ' + ('"NaN"' if spelled else "NaN"))
    assert new != text
    (store / "i" / ".zarray").write_text(new)


@pytest.mark.parametrize("case", ["char", "bare-nan-fill-on-int", "nan-fill-on-int", "stale-zmetadata"])
def test_default_fix_keeps_zarr_python_reading_the_other_arrays(tmp_path, case):
    """#20 item 7: a .zmetadata with an entry zarr-python refuses makes it refuse the whole group."""
    store = c410(tmp_path / "n.file", char=case in ("char", "stale-zmetadata"), shuffle=True, partial_double=True)
    if "nan" in case:
        _nan_fill_on_int(store, spelled=case == "nan-fill-on-int")
    if case == "stale-zmetadata":  # one written before /c existed: zarr-python reads through it
        meta = {p.relative_to(store).as_posix(): json.loads(p.read_text()) for p in store.rglob(".z*")
                if not p.relative_to(store).as_posix().startswith("c/")}
        (store / ".zmetadata").write_text(json.dumps({"metadata": meta, "zarr_consolidated_format": 1}))
    before = zarr_reads(store, ["d"])
    assert isinstance(before["d"], list)  # zarr-python reads /d before the fix (its verdict is the expectation)
    result = run(str(store), "--no-backup")
    assert result.returncode == 0, result.stderr
    import netCDF4

    # still read: the cell netCDF4-python wrote as before, the unwritten ones as netCDF4-python's default fill
    # (exact now: NCZ-FIX-FILL-EXACT). netcdf-c itself aborts on a NaN fill on integers, so it is not asked here.
    assert zarr_reads(store, ["d"]) == {"d": [1.5] + [netCDF4.default_fillvals["f8"]] * 3}
    assert before["d"][0] == 1.5
    assert not (store / ".zmetadata").exists()
    if case == "stale-zmetadata":
        assert "NCZ-FIX-CONSOLIDATE /.zmetadata: stale, and zarr-python would refuse the whole group" in result.stdout
    else:
        assert "note: NCZ-FIX-CONSOLIDATE /.zmetadata: not written: zarr-python would refuse" in result.stdout


def test_writer_and_fix_share_the_consolidation_rule():
    """One predicate, not two copies: the writer's property and the fix both call it."""
    import inspect

    from nczarr_conformance.fix import fixes
    from nczarr_conformance.nczarr import writer

    assert "refused_by_zarr_python(" in inspect.getsource(writer.DatasetWriter.consolidated.fget)
    assert "refused_by_zarr_python(" in inspect.getsource(fixes.refused_entry)


# ---- the reader check: an edit that some reader reads worse is refused ----------------------------------
def test_an_edit_zarr_python_reads_worse_is_refused(tmp_path):
    """The writer's rule does not know every entry zarr-python refuses (an unknown codec); zarr-python
    itself, run on the edited metadata, does: it reads /d before and would refuse the group after."""
    store = c410(tmp_path / "n.file", byte=True, shuffle=True, partial_double=True)
    doc = json.loads((store / "i" / ".zarray").read_text())
    doc["compressor"] = {"id": "nosuchcodec"}
    (store / "i" / ".zarray").write_text(json.dumps(doc))
    before_reads = zarr_reads(store, ["d", "i"])
    assert isinstance(before_reads["d"], list)
    before = snapshot(tmp_path)
    result = run(str(store), "--for", "zarr-python")
    assert result.returncode == 2, result.stdout
    line = one_line(result.stderr)
    assert "refused: after the edits zarr-python cannot read /d" in line and line.endswith("nothing was changed")
    assert snapshot(tmp_path) == before and zarr_reads(store, ["d", "i"]) == before_reads


def test_an_edit_netcdf_c_reads_differently_is_refused(tmp_path):
    """A fix that changed what netcdf-c reads (here a made-up one, swapping the byte order) is refused."""
    from nczarr_conformance.errors import UsageError
    from nczarr_conformance.fix import fix_store
    from nczarr_conformance.fix.registry import FIXES, fix

    store = c410(tmp_path / "n.file", partial_double=True)

    @fix("NCZ-FIX-TEST-SWAP", readers=("tensorstore",))
    def swap(ctx):
        """Test only: /d's <f8 becomes >f8 (every stored double then reads byte-swapped)."""
        ctx.zarray("/d")["dtype"] = ">f8"
        yield FIXES["NCZ-FIX-TEST-SWAP"].change("/d/.zarray", "<f8 → >f8")

    before = snapshot(tmp_path)
    try:
        with pytest.raises(UsageError, match=r"netcdf-c reads other values from /d than before.*nothing was changed"):
            fix_store(str(store), targets="tensorstore")
    finally:
        del FIXES["NCZ-FIX-TEST-SWAP"]
    assert snapshot(tmp_path) == before


def test_the_first_chunk_on_nested_keys_is_sampled_so_an_edit_reading_it_worse_is_refused(tmp_path):
    """fix/verify.py samples each array's first chunk whatever its dimension_separator: on a nested store
    (``m/0/0``, ``"/"``) an edit that makes that chunk undecodable is refused. Were ``0/0`` left out of the probe,
    both probes would read /m as fill and the edit would pass unseen."""
    import netCDF4

    from nczarr_conformance.errors import UsageError
    from nczarr_conformance.fix import fix_store
    from nczarr_conformance.fix.registry import FIXES, fix

    store = tmp_path / "n.file"
    want = np.arange(8.0).reshape(2, 4)
    with netCDF4.Dataset(url(store), "w") as nc:
        nc.createDimension("y", 2)
        nc.createDimension("x", 4)
        nc.createVariable("m", "f8", ("y", "x"), chunksizes=(2, 4))[:] = want
    doc = zarray(store, "m")
    doc["dimension_separator"] = "/"
    (store / "m" / ".zarray").write_text(json.dumps(doc))
    (store / "m" / "0").mkdir()
    os.rename(store / "m" / "0.0", store / "m" / "0" / "0")
    read = nc_read(store).root.variables["m"].data  # netcdf-c reads the nested store: the precondition
    np.testing.assert_array_equal(read, want)

    @fix("NCZ-FIX-TEST-ZLIB", readers=("tensorstore",))
    def zlib(ctx):
        """Test only: /m's raw chunks declared zlib (the chunk then does not decode; the fill reads as it did)."""
        ctx.zarray("/m")["compressor"] = {"id": "zlib", "level": 1}
        yield FIXES["NCZ-FIX-TEST-ZLIB"].change("/m/.zarray", "compressor null → zlib")

    before = snapshot(tmp_path)
    try:
        with pytest.raises(UsageError, match=r"refused: after the edits netcdf-c cannot read /m.*nothing was changed"):
            fix_store(str(store), targets="tensorstore")
    finally:
        del FIXES["NCZ-FIX-TEST-ZLIB"]
    assert snapshot(tmp_path) == before


def test_the_probe_of_a_local_store_is_made_beside_it_never_in_it(tmp_path, monkeypatch):
    """fix/verify.py: the reader check's probe is a private directory next to a local store (under its
    temporary prefix, so a killed run's probe is a leftover the next run removes), never inside it, where
    readers list; it is gone once the check is done."""
    from nczarr_conformance.fix import fix_store, verify

    store = c410(tmp_path / "n.file", byte=True)
    made: list[Path] = []
    real = verify._write_probes

    def seen(top, *args, **kw):
        made.append(top)
        return real(top, *args, **kw)

    monkeypatch.setattr(verify, "_write_probes", seen)
    fix_store(str(store), backup=False)
    (top,) = made
    assert top.parent == tmp_path and top.name.startswith(".n.file.partial-"), top
    assert not top.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_one_netcdf_c_worker_reads_the_probes_of_every_fix_in_a_process(tmp_path):
    """fix/verify.py: netcdf-c's child is a worker kept for the process (netCDF4-python imported once, issue
    #26), not a process per fix; both fixes are still checked by it (their probes read)."""
    from nczarr_conformance.fix import fix_store, verify

    pids = []
    for name in ("a.file", "b.file"):
        store = c410(tmp_path / name, byte=True)
        fix_store(str(store), backup=False)
        worker = verify._CHILDREN._idle.get_nowait()
        verify._CHILDREN._idle.put(worker)
        pids.append(worker.proc.pid)
        assert worker.alive()
    assert pids[0] == pids[1]


def test_netcdf_c_crashing_on_the_edited_store_costs_the_verdict_not_the_one_line(tmp_path, monkeypatch):
    """fix/verify.py: netcdf-c reads both probes in a child; here the child saves its readings of the store
    as it is, then dies of SIGSEGV opening the edited one (as netcdf-c does on hostile metadata). The fix is
    refused with one line naming the crash, exit 2, nothing changed."""
    from nczarr_conformance.errors import UsageError
    from nczarr_conformance.fix import fix_store, verify
    from nczarr_conformance.workers import WorkerPool

    store = c410(tmp_path / "n.file", byte=True)
    # the worker's protocol (nczarr_conformance/workers.py): one request a line, {"id", "top", "flavor"}
    crash_on_after = ("import json, os, signal, sys\n"
                      "from pathlib import Path\n"
                      "from nczarr_conformance.sources import netcdf_c_readings as child\n"
                      "request = json.loads(sys.stdin.readline())\n"
                      "top = Path(request['top'])\n"
                      "arrays = json.loads((top / 'arrays.json').read_text())\n"
                      "before = child.read_netcdf_c(top / 'before', arrays, request['flavor'])\n"
                      "child.save_readings(before, arrays, top / 'netcdf-c-before.npz')\n"
                      "os.kill(os.getpid(), signal.SIGSEGV)\n")
    assert verify._CHILDREN.argv[1:] == ["-m", "nczarr_conformance.sources.netcdf_c_readings", "--serve"]
    monkeypatch.setattr(verify, "_CHILDREN", WorkerPool([sys.executable, "-c", crash_on_after], lambda: os.environ,
                                                        None))
    before = snapshot(tmp_path)
    with pytest.raises(UsageError) as refused:
        fix_store(str(store), backup=False)
    line = str(refused.value)
    assert "\n" not in line and refused.value.exit_code == 2
    assert f"netcdf-c cannot read /b (netcdf-c crashed (killed by signal {int(signal.SIGSEGV)}" in line, line
    assert line.endswith("nothing was changed")
    assert snapshot(tmp_path) == before


def _readings(**arrays: list[float]) -> dict[str, object]:
    from nczarr_conformance.fix.verify import Reading

    return {f"/{name}": Reading(values=np.array(values)) for name, values in arrays.items()}


def test_a_fix_may_move_a_reader_towards_netcdf_c_never_away():
    """fix/verify.worse: zarr-python reading what netcdf-c read is what a fix is for; zarr-python leaving
    netcdf-c's values (netcdf-c unchanged) is a reader made worse."""
    from nczarr_conformance.fix.verify import worse

    netcdf_c = _readings(a=[1, 2, 3])
    towards = worse({"netcdf-c": netcdf_c, "zarr-python": _readings(a=[1, 2, 300])},
                    {"netcdf-c": netcdf_c, "zarr-python": _readings(a=[1, 2, 3])})
    away = worse({"netcdf-c": netcdf_c, "zarr-python": _readings(a=[1, 2, 3])},
                 {"netcdf-c": netcdf_c, "zarr-python": _readings(a=[1, 2, 300])})
    assert towards == [] and away == ["zarr-python reads other values from /a than before"]


@pytest.mark.parametrize("after,accepted", [
    ([1, -9, 3, -9], True),  # the fill cells read the new fill, every other cell the same value
    ([1, -9, -9, 3], False),  # a fill cell moved
    ([1, -9, 4, -9], False),  # another cell changed
    ([1, -9, 3, -1], False),  # one fill cell read the old fill, the other the new: not the variable's fill
], ids=["fill-only", "fill-moved", "value-changed", "mixed"])
def test_only_a_changed_fill_is_no_worse(after, accepted):
    """fix/verify.worse, exception (b): the same cells read the fill before (declared -1) and after (the new
    _FillValue -9), every other cell the same value; anything else reads worse."""
    from nczarr_conformance.fix.verify import worse

    before = {"nczarr-conformance": _readings(a=[1, -1, 3, -1])}
    now = {"nczarr-conformance": _readings(a=after)}
    found = worse(before, now, {"/a": ([-1], [-9])})
    assert found == ([] if accepted else ["nczarr-conformance reads other values from /a than before"])


def test_same_values_whatever_each_readers_dtype():
    """fix/verify.same: readers return other dtypes for the same values (int8 and int64, float32 and
    float64, bytes and str); NaN equals NaN; text is compared as text, never with numbers."""
    from nczarr_conformance.fix.verify import same

    assert same(np.array([1, -2], "i1"), np.array([1, -2], "i8"))
    assert same(np.array([1.5, np.nan], "f4"), np.array([1.5, np.nan], "f8"))
    assert not same(np.array([1.5, np.nan]), np.array([1.5, 2.0]))
    assert same(np.array([b"ab", b"c"], "S2"), np.array(["ab", "c"], dtype=object))
    assert same(np.array([b"c\x00"], "O"), np.array(["c"]))  # netcdf-c's trailing NUL
    assert not same(np.array(["1"]), np.array([1]))
    assert not same(np.array([1, 2]), np.array([1, 2, 2]))


# ---- item 8: the backup is always outside the store --------------------------------------------------
def test_fix_run_from_inside_the_store_keeps_its_backup_beside_it(tmp_path):
    from nczarr_conformance.checker import Severity, check

    def errors() -> int:  # nczarr-check's "N errors", asked in this process: the fix's run is the subject
        return check(str(store)).count(Severity.ERROR)

    store = c410(tmp_path / "n.file", byte=True)
    errors_before = errors()
    result = run(".", cwd=store)
    assert result.returncode == 0, result.stderr
    backups = [p for p in tmp_path.iterdir() if p.name.startswith("n.file.nczarr-fix-backup-")]
    assert len(backups) == 1 and f"backup: {backups[0]}" in result.stdout
    assert not [p for p in store.rglob("*") if "backup" in p.name]
    assert errors() == errors_before
    assert run(".", cwd=store).stdout == "nothing to fix\n"  # the next fix finds no backup to "fix"


# ---- item 17b: a new object gets the store's permissions ---------------------------------------------
@pytest.mark.parametrize("kind", ["dir", "zip"])
def test_a_new_zmetadata_gets_the_permissions_of_its_siblings(tmp_path, kind):
    store = c410(tmp_path / "n.file", byte=True)
    for p in store.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    if kind == "zip":
        path = tmp_path / "n.zip"
        with zipfile.ZipFile(path, "w") as zf:
            for p in sorted(store.rglob("*")):
                if p.is_file():
                    info = zipfile.ZipInfo(f"n/{p.relative_to(store)}")
                    info.external_attr = 0o640 << 16
                    zf.writestr(info, p.read_bytes())
        store = path
    result = run(str(store), "--no-backup", preexec=lambda: os.umask(0o077))  # a private umask, as in cron jobs
    assert result.returncode == 0, result.stderr
    if kind == "dir":
        assert stat.S_IMODE((store / ".zmetadata").stat().st_mode) == 0o644  # as .zgroup and every other object
        assert stat.S_IMODE((store / "b" / ".zarray").stat().st_mode) == 0o644
    else:
        with zipfile.ZipFile(store) as zf:
            assert (zf.getinfo("n/.zmetadata").external_attr >> 16) & 0o777 == 0o640  # as n/.zgroup


# ---- item 10: a failure part-way changes nothing and says so --------------------------------------------
def _many_bytes(path: Path, n: int) -> Path:
    """netcdf-c's store with ``n`` one-byte-integer arrays: each ``.zarray`` is one edit of the fix."""
    import netCDF4

    with netCDF4.Dataset(url(path), "w") as nc:
        nc.createDimension("x", 4)
        for i in range(n):
            nc.createVariable(f"b{i:03d}", "i1", ("x",))[:] = np.arange(4, dtype="i1")
    return path


def _big_second_chunk(path: Path) -> Path:
    """A shuffled array: chunk 0 compresses to almost nothing, chunk 1 (random) to ~64 KiB."""
    import netCDF4

    with netCDF4.Dataset(url(path), "w") as nc:
        nc.createDimension("x", 2 * 16384)
        v = nc.createVariable("i", "i4", ("x",), zlib=True, shuffle=True, chunksizes=(16384,))
        v[:16384] = np.zeros(16384, "i4")
        v[16384:] = np.random.default_rng(0).integers(-2**31, 2**31 - 1, 16384, dtype="i4")
    return path


def _file_limit(limit: int) -> Callable[[], None]:
    """RLIMIT_FSIZE for the child: a write past ``limit`` bytes fails with EFBIG (as root too)."""
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.parametrize("case", ["metadata-only", "chunk-rewrite"])
def test_a_write_failing_part_way_changes_nothing_and_says_so(tmp_path, case):
    """#20 item 10. A directory made read-only does not stop root, so the failure is a file-size
    limit: every .zarray (under 1 KiB) can be written, the .zmetadata of 20 arrays (~8 KiB), or the
    re-encoded random chunk (~64 KiB), cannot."""
    if case == "metadata-only":
        store, limit, failing = _many_bytes(tmp_path / "n.file", 20), 4096, ".zmetadata"
        assert (tmp_path / "n.file" / "b000" / ".zarray").stat().st_size < 1024
    else:
        store, limit, failing = _big_second_chunk(tmp_path / "n.file"), 32768, "i/1"
        assert (store / "i" / "1").stat().st_size > 2 * limit and (store / "i" / "0").stat().st_size < 1024
    before = snapshot(tmp_path)
    result = run(str(store), "--no-backup", preexec=_file_limit(limit))
    assert result.returncode == 2, result.stdout
    line = one_line(result.stderr)
    assert failing in line and "File too large" in line and line.endswith("nothing was changed"), line
    assert snapshot(tmp_path) == before  # bytes and mtimes: not one object rewritten, nothing left beside it


# ---- item 9: SIGINT / SIGKILL during an in-place fix -------------------------------------------------
@pytest.fixture(scope="module")
def many_arrays(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes]]:
    """200 arrays to fix (and the fixed store's contents, from a run nobody interrupted: what
    ``nczarr-fix --no-backup`` does, called in this process, as each case's second run is)."""
    from nczarr_conformance.fix import fix_store

    root = tmp_path_factory.mktemp("many")
    store = _many_bytes(root / "n.file", 200)
    fixed = root / "fixed.file"
    shutil.copytree(store, fixed)
    fix_store(str(fixed), backup=False)
    return store, contents(fixed)


@pytest.fixture(scope="module")
def many_arrays_zipped(many_arrays, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes]]:
    """many_arrays' store zipped, and the fixed zip's contents from a run nobody interrupted (one fix for the
    module, not one per zip case: each case copies the zip)."""
    from nczarr_conformance.fix import fix_store

    template, _ = many_arrays
    root = tmp_path_factory.mktemp("many-zip")
    store = _zip_of(template, root / "n.zip")
    (root / "f").mkdir()
    fixed_zip = Path(shutil.copy(store, root / "f" / "n.zip"))  # the same name: a zip's top is its stem
    fix_store(str(fixed_zip), backup=False)
    return store, contents(fixed_zip)


def _moment(store: Path, name: str) -> Callable[[], bool]:
    """Whether the run reached a moment, seen from outside: ``change`` anything beside the store or in
    its first array (what today's in-place writes touch first), ``backup`` the backup in place."""
    parent, first = store.parent, store / "b000"
    listing = sorted(os.listdir(parent))
    inode = store.stat().st_ino if store.is_dir() else None
    stamp = (first / ".zarray").stat().st_mtime_ns if store.is_dir() else None

    def changed() -> bool:
        if sorted(os.listdir(parent)) != listing or (inode is not None and store.stat().st_ino != inode):
            return True
        if stamp is None:
            return False
        try:
            return (first / ".zarray").stat().st_mtime_ns != stamp or len(os.listdir(first)) != 3
        except FileNotFoundError:
            return True

    def backup() -> bool:
        return any(p.startswith(f"{store.name}.nczarr-fix-backup-") for p in os.listdir(parent))

    return changed if name == "change" else backup


def _wait(cond: Callable[[], bool], proc: subprocess.Popen[str], timeout: float = 60) -> bool:
    """True at the moment; False if the fix finished first (the try then checks the finished store)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if proc.poll() is not None:
            return False
        assert time.monotonic() < deadline, "the fix never reached the moment"
        time.sleep(0.002)
    return True


def _zip_of(store: Path, dest: Path) -> Path:
    with zipfile.ZipFile(dest, "w") as zf:
        for p in sorted(store.rglob("*")):
            if p.is_file():
                zf.write(p, f"{dest.stem}/{p.relative_to(store)}")
    return dest


@pytest.mark.parametrize("kind,moment,delay,sig", [  # measured here: the first two of each kill the
    ("dir", "change", 0.0, signal.SIGKILL),          # snapshot being built or edited (old store kept),
    ("dir", "backup", 0.03, signal.SIGKILL),         # +0.15 s lands at or after the exchange (fixed store,
    ("dir", "backup", 0.15, signal.SIGKILL),         # the old tree left aside for the next run to remove)
    ("dir", "change", 0.0, signal.SIGINT),
    ("dir", "backup", 0.01, signal.SIGINT),
    ("dir", "backup", 0.15, signal.SIGINT),
    ("zip", "backup", 0.0, signal.SIGKILL),
    ("zip", "backup", 0.0, signal.SIGINT),
])
def test_a_signal_during_an_in_place_fix_leaves_the_old_store_or_the_fixed_one(request, tmp_path, kind, moment,
                                                                               delay, sig):
    """#20 item 9: never ``..zarray.*.partial`` files inside the store, never half the edits; the next
    fix removes what a killed one left beside the store and finishes the job. The interrupted fix is the
    command itself (its signal handling is the point); the next one is ``nczarr-fix --no-backup``'s call,
    made in this process (the leftovers are removed by the store it opens, and its readers stay warm)."""
    from nczarr_conformance.fix import fix_store

    template, fixed = request.getfixturevalue("many_arrays_zipped" if kind == "zip" else "many_arrays")
    store = tmp_path / template.name
    if kind == "zip":  # the same store zipped; the fixed zip from a run nobody interrupted
        shutil.copy(template, store)
    else:
        shutil.copytree(template, store)
    before = contents(store)
    proc = start("nczarr_conformance.cli.fix", str(store))
    if _wait(_moment(store, moment), proc):
        time.sleep(delay)
        proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 0:
        assert contents(store) == fixed  # finished before the signal
    elif sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode == 130 and one_line(err).endswith("interrupted"), err
    if kind == "dir":
        assert not [p for p in store.rglob("*") if "partial" in p.name]  # nothing half-written inside the store
    assert contents(store) in (before, fixed), "half of the edits"
    fix_store(str(store), backup=False)  # raises (the command's one line) if it cannot finish the job
    assert contents(store) == fixed
    assert safety.find_leftovers(store) == [] and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


# ---- item 1: a fix and an append at the same time ----------------------------------------------------------
def series(path: Path | str, t0: int, n: int) -> Path | str:
    """A record series (as tests/test_append.py's), with a one-byte variable for the fix to edit."""
    import netCDF4

    with netCDF4.Dataset(str(path), "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", 3)
        t = nc.createVariable("time", "f8", ("time",), chunksizes=(4,))
        t.units = "days"
        v = nc.createVariable("v", "i1", ("time", "x"), chunksizes=(4, 3))
        t[:] = np.arange(t0, t0 + n, dtype="f8")
        v[:] = (np.arange(t0 * 3, (t0 + n) * 3).reshape(n, 3) % 100).astype("i1")
    return path


def _records(store: Path) -> list[float]:
    return nc_read(store).root.variables["time"].data.tolist()


def _inputs(tmp_path: Path) -> tuple[Path, Path, list[float]]:
    """netcdf-c's store holding a.nc's 5 records, b.nc's 6 to append, and the 11 times both hold."""
    import netCDF4

    a, b, store = tmp_path / "a.nc", tmp_path / "b.nc", tmp_path / "s.file"
    series(a, 0, 5)
    series(b, 5, 6)
    series(url(store), 0, 5)
    with netCDF4.Dataset(str(a)) as x, netCDF4.Dataset(str(b)) as y:
        expected = x["time"][:].tolist() + y["time"][:].tolist()
    return store, b, expected


def append_cli(b: Path, store: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", "--append", "time", str(b),
                           str(store)], check=False, capture_output=True, text=True, timeout=120)


def test_an_append_committed_while_the_fix_runs_is_kept(tmp_path, monkeypatch):
    """#20 item 1, made deterministic: the append runs (and commits) after the fix has planned, before it
    writes. Today's fix renames old-shape .zarray files into the tree the append swapped in."""
    import nczarr_conformance.fix as fix_module
    from nczarr_conformance.errors import StoreError

    store, b, expected = _inputs(tmp_path)
    real = fix_module.write_backup
    appended: list[subprocess.CompletedProcess[str]] = []

    def append_then_backup(spec, source, plan):  # the moment between the plan and the writes
        appended.append(append_cli(b, store))
        return real(spec, source, plan)

    monkeypatch.setattr(fix_module, "write_backup", append_then_backup)
    try:
        fix_module.fix_store(str(store))
        refused = None
    except StoreError as exc:
        refused = str(exc)
    assert appended
    if appended[0].returncode != 0:  # refused by the one-writer lock (branch locks): the fix goes on alone
        assert len(appended[0].stderr.strip().splitlines()) == 1, appended[0].stderr
        assert refused is None and _records(store) == expected[:5] and zarray(store, "v")["dtype"] == "|i1"
        return
    assert _records(store) == expected  # the appended records are there
    if refused is None:
        assert zarray(store, "v")["dtype"] == "|i1" and zarray(store, "v")["shape"] == [11, 3]
    else:
        assert "replaced by another writer" in refused and refused.endswith("nothing was changed"), refused
        assert not [p for p in tmp_path.iterdir() if "backup" in p.name]  # nothing changed: no backup kept


#: when the append starts: with the fix; when the fix's snapshot (its aside tree) appears beside the
#: store; when its backup appears (it is about to write and commit); each twice
RACE_MOMENTS = ("start", "start", "snapshot", "snapshot", "backup", "backup")


def _fix_reached(store: Path, moment: str) -> Callable[[], bool]:
    if moment == "start":
        return lambda: True
    if moment == "snapshot":
        return lambda: any(n.startswith(f".{store.name}.partial-") for n in os.listdir(store.parent))
    return lambda: any(n.startswith(f"{store.name}.nczarr-fix-backup-") for n in os.listdir(store.parent))


def test_a_fix_racing_an_append_loses_neither(tmp_path):
    """#20 item 1 with real processes, six tries, the append started at three moments of the fix; each
    try must hold: an append that exited 0 is in the store, a fix either refused in one line changing
    nothing, or its edits are in the store too (the append then started from the fixed store)."""
    for i, moment in enumerate(RACE_MOMENTS):
        work = tmp_path / str(i)
        work.mkdir()
        store, b, expected = _inputs(work)
        fixer = start("nczarr_conformance.cli.fix", str(store))
        _wait(_fix_reached(store, moment), fixer)
        appender = start("nczarr_conformance.cli.convert", "--append", "time", str(b), str(store))
        _, fix_err = fixer.communicate(timeout=120)
        _, app_err = appender.communicate(timeout=120)
        assert appender.returncode in (0, 2) and fixer.returncode in (0, 2), (fix_err, app_err)
        if appender.returncode == 2:  # refused in one line (by the one-writer lock, branch locks)
            one_line(app_err)
        assert _records(store) == (expected if appender.returncode == 0 else expected[:5]), (i, fix_err, app_err)
        if fixer.returncode == 2:  # refused in one line: the store does not hold its edits, nor its backup
            one_line(fix_err)
            assert zarray(store, "v")["dtype"] == "<i1" and not [p for p in work.iterdir() if "backup" in p.name]
        else:
            assert zarray(store, "v")["dtype"] == "|i1", (i, moment)  # the fix's edit, kept by the append
        assert not [p for p in work.iterdir() if p.name.startswith(".")]


# ---- S3: what the in-place fix checks before its batch ---------------------------------------------------
def _upload(client, bucket: str, store: Path, prefix: str) -> None:
    for p in store.rglob("*"):
        if p.is_file():
            client.put_object(Bucket=bucket, Key=f"{prefix}/{p.relative_to(store)}", Body=p.read_bytes())


def _listing(client, bucket: str) -> dict[str, str]:
    return {o["Key"]: o["ETag"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])}


@pytest.mark.s3
def test_s3_fix_refuses_a_prefix_under_a_writers_marker(tmp_path, s3_bucket, moto_server):
    import boto3

    client = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")
    _upload(client, s3_bucket, c410(tmp_path / "n.file", byte=True), "ds")
    client.put_object(Bucket=s3_bucket, Key="ds/.nczarr-partial", Body=json.dumps({"host": "elsewhere", "pid": 1}))
    before = _listing(client, s3_bucket)
    result = run(f"s3://{s3_bucket}/ds")
    assert result.returncode == 2 and ".nczarr-partial" in one_line(result.stderr)
    assert _listing(client, s3_bucket) == before


@pytest.mark.s3
def test_s3_fix_refuses_when_an_object_changed_after_it_planned(tmp_path, s3_bucket, moto_server, monkeypatch):
    """Another writer's metadata (an append's new shape) PUT between the plan and the batch is kept."""
    import boto3

    import nczarr_conformance.fix as fix_module
    from nczarr_conformance.errors import StoreError

    client = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")
    _upload(client, s3_bucket, c410(tmp_path / "n.file", byte=True), "ds")
    theirs = json.loads(client.get_object(Bucket=s3_bucket, Key="ds/b/.zarray")["Body"].read())
    theirs["shape"] = [8]
    real = fix_module.write_backup

    def other_writer_then_backup(spec, source, plan):
        client.put_object(Bucket=s3_bucket, Key="ds/b/.zarray", Body=json.dumps(theirs).encode())
        return real(spec, source, plan)

    monkeypatch.setattr(fix_module, "write_backup", other_writer_then_backup)
    before = _listing(client, s3_bucket)
    with pytest.raises(StoreError, match=r"b/\.zarray changed since the fix read it.*nothing was changed"):
        fix_module.fix_store(f"s3://{s3_bucket}/ds")
    after = _listing(client, s3_bucket)
    assert json.loads(client.get_object(Bucket=s3_bucket, Key="ds/b/.zarray")["Body"].read()) == theirs
    assert {k: v for k, v in after.items() if k != "ds/b/.zarray"} == \
        {k: v for k, v in before.items() if k != "ds/b/.zarray"}  # no other object rewritten, no backup kept
