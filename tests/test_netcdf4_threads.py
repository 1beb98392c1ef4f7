"""netcdf-c (netCDF4-python's 4.10.1) is not thread-safe: every netCDF4 dataset's whole life, open, calls and close,
happens under sources/netcdf4.LOCK, and one file is open once in the process (sources/netcdf4.open_nc, close_nc).

A CI run crashed (SIGSEGV in netCDF4's close) while another thread's conversion read values; netcdf-c 4.10.1 also
crashes in one thread when one file is open three times and some are closed after a string was read (the peer bug
pinned below), which two conversions of one file on two threads did."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

netCDF4 = pytest.importorskip("netCDF4")

from nczarr_conformance.sources import netcdf4 as nc4  # noqa: E402
from tests.peers.known import PeerStillWrong, still_wrong  # noqa: E402

#: netcdf-c 4.10.1 (netCDF4-python's wheel): one file open three times, a string variable read through the third,
#: the third and the first closed, the file opened again: SIGSEGV in nc_open (HDF5 underneath), no thread involved.
#: ``OPEN``, ``CLOSE``, ``READ`` are filled in by each script below.
_SAME_FILE_SEQUENCE = """
import sys
a = OPEN(sys.argv[1]); b = OPEN(sys.argv[1]); c = OPEN(sys.argv[1])
READ(c)
CLOSE(c); CLOSE(a)
d = OPEN(sys.argv[1])
READ(d)
CLOSE(d); CLOSE(b)
print("ok")
"""

_RAW = """
import netCDF4
OPEN = lambda p: netCDF4.Dataset(p, "r")
CLOSE = lambda nc: nc.close()
def READ(nc):
    nc["strings"].set_auto_maskandscale(False)
    nc["strings"][...]
"""

_OURS = """
from nczarr_conformance.sources import netcdf4 as nc4
OPEN = lambda p: nc4.open_nc(p)
CLOSE = nc4.close_nc
READ = lambda nc: nc4.read_values(nc["strings"])
"""


def _run(script: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(script), *args],
                          capture_output=True, text=True, timeout=timeout)


def test_the_rich_sample_holds_a_string_variable(rich_nc: Path) -> None:
    """The precondition of the peer bug below: the file has the NC_STRING variable the sequence reads."""
    with netCDF4.Dataset(rich_nc) as nc:
        assert nc["strings"].dtype is str


@pytest.mark.xfail(strict=True, raises=PeerStillWrong,
                   reason="netcdf-c 4.10.1: a file open three times, a string read, two closed, opened again: SIGSEGV")
def test_netcdf4_python_opens_one_file_three_times_and_again_after_two_closes(rich_nc: Path) -> None:
    done = _run(_RAW + _SAME_FILE_SEQUENCE, str(rich_nc))
    still_wrong((done.returncode, done.stdout.strip()), wrong=(-signal.SIGSEGV, ""), right=(0, "ok"))


def test_our_opens_of_one_file_share_one_dataset_and_survive_that_sequence(rich_nc: Path) -> None:
    """open_nc hands every user of one file the one dataset open in the process; the last close_nc closes it."""
    done = _run(_OURS + _SAME_FILE_SEQUENCE, str(rich_nc))
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr[-2000:]
    first, second = nc4.open_nc(str(rich_nc)), nc4.open_nc(str(rich_nc))
    try:
        assert first is second
    finally:
        nc4.close_nc(first)
    assert second.isopen()  # still the other user's
    nc4.close_nc(second)
    assert not first.isopen()
    assert nc4._SHARED == {}


def test_a_dataset_closed_by_its_user_is_not_handed_out_again(rich_nc: Path) -> None:
    """A user that closes what open_nc gave it with ``nc.close()`` (not close_nc) leaves no closed dataset behind
    for the next user of the file."""
    nc = nc4.open_nc(str(rich_nc))
    nc.close()
    again = nc4.open_nc(str(rich_nc))
    try:
        assert again.isopen()
        assert nc4.read_values(again["v_i1"]).tolist() == [-128, 127, 0, 1, 2]  # as testing/samples.py writes it
    finally:
        nc4.close_nc(again)
    nc4.close_nc(nc)  # the late close of the first user closes nothing twice
    assert nc4._SHARED == {}


class _Spy:
    """netCDF4.Dataset replaced by a factory of proxies that record, for every dataset, whether LOCK was held when it
    was opened and closed, and whether it was still open when the last reference to it went (netCDF4's
    ``__dealloc__`` then closes it wherever that happens). A proxy, not a subclass: a Python subclass of
    netCDF4's Cython Dataset corrupts the interpreter's memory when its instances are freed (a double free at exit)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[tuple[str, bool]] = []
        spy = self
        real = netCDF4.Dataset

        class Proxy:
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                spy.events.append(("open", nc4.LOCK._is_owned()))
                self._real = real(*args, **kwargs)

            def __getattr__(self, name: str) -> Any:
                return getattr(self._real, name)

            def __getitem__(self, key: str) -> Any:
                return self._real[key]

            def close(self) -> None:
                spy.events.append(("close", nc4.LOCK._is_owned()))
                self._real.close()

            def __del__(self) -> None:
                if "_real" in self.__dict__ and self._real.isopen():
                    spy.events.append(("dropped open", nc4.LOCK._is_owned()))

        monkeypatch.setattr(netCDF4, "Dataset", Proxy)

    def assert_every_life_under_the_lock(self) -> None:
        import gc

        gc.collect()  # a dataset in a reference cycle (its variables point back at it) goes here
        assert self.events, "no netCDF4 dataset was opened: the spy saw nothing"
        assert [e for e in self.events if e[0] == "dropped open"] == []
        assert [e for e in self.events if not e[1]] == []
        assert sum(e[0] == "open" for e in self.events) == sum(e[0] == "close" for e in self.events)


def test_read_opens_and_closes_under_the_lock(rich_nc: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = _Spy(monkeypatch)
    nc4.read(str(rich_nc))
    spy.assert_every_life_under_the_lock()


def test_convert_opens_and_closes_under_the_lock(rich_nc: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from nczarr_conformance.conversion.from_netcdf import convert

    spy = _Spy(monkeypatch)
    convert(str(rich_nc), str(tmp_path / "out.zarr"), threads=1)
    spy.assert_every_life_under_the_lock()


def test_dump_opens_and_closes_under_the_lock(rich_nc: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """nczarr-dump IN.nc: the file's source holds its dataset until the dump closes it."""
    from nczarr_conformance.sources.dump_source import open_source

    spy = _Spy(monkeypatch)
    with open_source(str(rich_nc)) as source:
        assert [len(s) for s in source.slabs("/v_i1", source.dataset.root.variables["v_i1"])] == [5]
    spy.assert_every_life_under_the_lock()


def test_a_refused_file_is_closed_under_the_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """open_nc refuses a file whose filter the HDF5 at hand lacks after opening it: that close is locked too."""
    from nczarr_conformance.errors import UnsupportedError

    path = tmp_path / "blosc.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 4)
        nc.createVariable("v", "i4", ("x",), compression="zlib")[:] = np.arange(4)
    monkeypatch.setattr(nc4, "filter_available", lambda nc, fid: False)
    spy = _Spy(monkeypatch)
    with pytest.raises(UnsupportedError):
        nc4.open_nc(str(path))
    spy.assert_every_life_under_the_lock()
    assert nc4._SHARED == {}


_STRESS = """
import shutil, sys, tempfile, threading, time
import numpy as np
import netCDF4
from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.conversion.from_netcdf import convert
from nczarr_conformance.sources import netcdf4 as nc4

src, seconds = sys.argv[1], float(sys.argv[2])
want = {}
with netCDF4.Dataset(src) as nc:  # netCDF4's own reading, before any thread starts
    def walk(group, path):
        for name, var in group.variables.items():
            var.set_auto_maskandscale(False)
            var.set_auto_chartostring(False)
            want[path + name] = np.ma.getdata(var[...]).copy()
        for name, sub in group.groups.items():
            walk(sub, path + name + "/")
    walk(nc, "/")
out, failed, rounds = tempfile.mkdtemp(), [], [0, 0, 0]
stop = time.monotonic() + seconds

def same(model, what):
    for gkey, group in model.root.walk():
        for name, var in group.variables.items():
            key = gkey.rstrip("/") + "/" + name
            expected = want[key]
            got = np.asarray(var.data, dtype=expected.dtype)
            if got.tolist() != expected.tolist() and not (expected.dtype.kind == "f"
                                                           and np.array_equal(got, expected, equal_nan=True)):
                failed.append(f"{what}: {key}: {got!r} != {expected!r}")

def work(i):
    try:
        while time.monotonic() < stop and not failed:
            if i == 2:
                same(nc4.read(src), "read")
            else:
                dst = f"{out}/{i}-{rounds[i]}.zarr"
                convert(src, dst, direct=False, threads=1)
                same(open_dataset(dst), "converted")
                shutil.rmtree(dst)
            rounds[i] += 1
    except BaseException as exc:
        failed.append(f"thread {i}: {type(exc).__name__}: {exc}")

threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(rounds, failed[:3])
sys.exit(1 if failed or min(rounds) == 0 else 0)
"""


def test_two_threads_converting_one_file_while_a_third_reads_it(rich_nc: Path) -> None:
    """Two conversions of one file and a reading of it, on three threads for a few seconds: no crash, no error,
    and every value is netCDF4's own reading of the file."""
    done = _run(_STRESS, str(rich_nc), "3")
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-3000:])


def test_writing_an_xarray_dataset_opens_and_closes_under_the_lock(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """write(xarray.Dataset) goes through xarray's netcdf4 engine, which locks its own calls, not against ours."""
    xr = pytest.importorskip("xarray")
    import nczarr_conformance

    spy = _Spy(monkeypatch)
    nczarr_conformance.write(xr.Dataset({"v": ("x", np.arange(3, dtype="i4"))}), str(tmp_path / "out.zarr"))
    spy.assert_every_life_under_the_lock()


def test_verify_reads_the_source_with_xarray_under_the_lock(rich_nc: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """nc2nczarr --verify's xarray comparison opens the source with xarray's netcdf4 engine: under our lock too."""
    pytest.importorskip("xarray")
    from nczarr_conformance.conformance.verify import xarray_decoded_differences
    from nczarr_conformance.conversion.from_netcdf import convert

    store = tmp_path / "out.zarr"
    convert(str(rich_nc), str(store), flavor="zarr")
    spy = _Spy(monkeypatch)
    xarray_decoded_differences(str(store), str(rich_nc))
    spy.assert_every_life_under_the_lock()


def _holds_lock(item: Any) -> bool:
    import ast

    expr = item.context_expr
    return (isinstance(expr, ast.Name) and expr.id == "LOCK") or (isinstance(expr, ast.Attribute)
                                                                  and expr.attr == "LOCK")


def _unlocked_dataset_calls(source: str) -> list[int]:
    """Lines of ``netCDF4.Dataset(...)`` calls not inside a ``with`` that takes LOCK (in its body, or in an item after
    the lock's)."""
    import ast

    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "Dataset"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "netCDF4"):
            continue
        child, parent, locked = node, parents.get(node), False
        while parent is not None and not locked:
            if isinstance(parent, (ast.With, ast.AsyncWith)):
                if child in parent.body:
                    locked = any(_holds_lock(item) for item in parent.items)
                elif isinstance(child, ast.withitem):
                    locked = any(_holds_lock(item) for item in parent.items[:parent.items.index(child)])
            child, parent = parent, parents.get(parent)
        if not locked:
            found.append(node.lineno)
    return found


def test_every_netcdf4_dataset_of_the_package_is_created_under_the_lock() -> None:
    """Each ``netCDF4.Dataset(...)`` in the package sits in a ``with LOCK`` (sources/netcdf4.open_nc for reading;
    a writer holds the lock from open to close); a new one outside fails here, naming its place."""
    from tests.conftest import REPO

    calls = {}
    for path in sorted((REPO / "nczarr_conformance").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "netCDF4.Dataset(" in text:
            calls[str(path.relative_to(REPO))] = _unlocked_dataset_calls(text)
    assert "nczarr_conformance/sources/netcdf4.py" in calls  # the check sees the calls it is about
    assert {path: lines for path, lines in calls.items() if lines} == {}
    assert _unlocked_dataset_calls("import netCDF4\nnc = netCDF4.Dataset('x')\n") == [2]
