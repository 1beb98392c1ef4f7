"""What the ported netcdf-c NCZarr tests share: the three writers, the three readers, the script's own diff.

A netcdf-c script typically builds a store with ``ncgen`` (or nccopy) from a CDL file, dumps it
with ``ncdump`` and ``diff``s the dump with a baseline, after ``sed`` lines that drop what is
platform dependent. A port does the same with each implementation we can run here:

- writers: ``ncgen`` of Debian's netcdf-c 4.9.0 straight into the store (the script's own step);
  ours (``nc2nczarr`` on the netCDF-4 file ``ncgen -4 -b`` builds from the same CDL); netCDF4-python
  on netcdf-c 4.10.1 (that netCDF-4 file, read and written again to the NCZarr URL);
- readers: ``ncdump`` 4.9.0 and ``nczarr-dump`` (their CDL text diffed with the baseline exactly as
  the script diffs it: ``-b`` or ``-w``, after the script's own ``sed`` deletions, nothing else), and
  netCDF4-python 4.10.1, which has no ``ncdump``: the model it reads is compared with the baseline
  parsed as CDL (content only: a baseline printed without ``-s`` states no storage).

A cell's outcome is ``PASS`` or the exact failure (exit code and first stderr line, or the diff
lines). Known peer failures are strict xfails on that exact outcome (``tests/peers/known.py``).
"""
from __future__ import annotations

import difflib
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nczarr_conformance.cdl_parse import parse_cdl
from nczarr_conformance.model import Dataset, Group, diff
from nczarr_conformance.testing.ignores import CDL_STATES_NO_STORAGE
from tests.conftest import REPO, require_module, require_tool
from tests.peers.known import PeerStillWrong, still_wrong

#: netcdf-c's test data, copied at the commit named in its README (test-only; not packaged)
NETCDF_C = REPO / "corpus" / "netcdf-c"
NCZARR_TEST = NETCDF_C / "nczarr_test"
NCDUMP_DIR = NETCDF_C / "ncdump"
PASS = "pass"
TIMEOUT = 120

WRITERS = ("ncgen-4.9.0", "ours", "netcdf4-4.10.1")
READERS = ("ncdump-4.9.0", "ours", "netcdf4-4.10.1")


@dataclass(frozen=True, slots=True)
class Run:
    """A finished command: exit code and its two streams."""

    rc: int
    out: str
    err: str

    @property
    def failure(self) -> tuple[int, str]:
        """(exit code, first stderr line): how a failed run is pinned."""
        return self.rc, (self.err.strip().splitlines() or [""])[0]


def run(argv: list[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
        timeout: float = TIMEOUT) -> Run:
    """Run a command; a hang is an outcome too (exit code ``"timeout"``), not an error of the test."""
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout, env=dict(env) if env else None, cwd=cwd)
    except subprocess.TimeoutExpired:
        return Run(-1, "", f"timeout: no answer in {timeout:g} s")
    decode = lambda b: b.decode("utf-8", "surrogateescape")  # noqa: E731 - ncdump prints raw bytes
    return Run(done.returncode, decode(done.stdout), decode(done.stderr))


def ours_env() -> dict[str, str]:
    """Our CLIs from this checkout, whatever is installed."""
    return dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore")


def nc_url(path: Path, mode: str) -> str:
    """netcdf-c's URL for a local store, e.g. ``mode="nczarr,file"``."""
    return f"file://{path}#mode={mode}"


# ---- writers ------------------------------------------------------------------------------------------------

class WriteFailed(Exception):
    """A writer could not build the store; ``args[0]`` is its pinned failure."""


def ncgen(cdl: Path, out: str, *flags: str, cwd: Path | None = None) -> Run:
    return run([require_tool("ncgen"), *flags, "-o", out, str(cdl)], cwd=cwd)


def netcdf4_file(cdl: Path, tmp: Path) -> Path:
    """The netCDF-4 (HDF5) file ncgen 4.9.0 builds from a CDL: the input of the other two writers."""
    nc = tmp / (cdl.stem + ".nc")
    built = ncgen(cdl, str(nc), "-4", "-b")
    if built.rc:
        raise WriteFailed(("ncgen -4 -b", *built.failure))
    return nc


def write_ours(nc: Path, url: str) -> None:
    """nc2nczarr to the script's URL (its mode asks for NCZarr or pure Zarr, xarray or not)."""
    done = run([sys.executable, "-m", "nczarr_conformance.cli.convert", "--quiet", str(nc), url], env=ours_env())
    if done.rc:
        raise WriteFailed(("nc2nczarr", *done.failure))


def write_netcdf4(nc: Path | str, url: str, cwd: Path | None = None, env: Mapping[str, str] | None = None) -> None:
    """netCDF4-python (netcdf-c 4.10.1) reads the netCDF-4 file and writes it again to ``url``.

    With ``cwd`` (or ``env``) it runs in a child process there, so that netcdf-c reads that directory's
    ``.ncrc`` (or those environment variables, e.g. ``NCZARR_CONSOLIDATED``).
    """
    require_module("netCDF4")
    if cwd is not None or env is not None:
        code = "import sys; from nczarr_conformance.peers import netcdf4; netcdf4.write(netcdf4.read(sys.argv[1]), " \
               "sys.argv[2])"
        done = run([sys.executable, "-c", code, str(nc), url], env={**ours_env(), **(env or {})}, cwd=cwd)
        if done.rc:
            raise WriteFailed(("netCDF4", *done.failure))
        return
    from nczarr_conformance.peers import netcdf4

    try:
        netcdf4.write(netcdf4.read(str(nc)), url)
    except Exception as exc:  # netCDF4 raises RuntimeError/OSError with netcdf-c's message
        raise WriteFailed(("netCDF4", type(exc).__name__, " ".join(str(exc).split()))) from exc


def build(writer: str, cdl: Path, tmp: Path, mode: str, *, ncgen_flags: Iterable[str] = ("-4", "-b"),
          cwd: Path | None = None, name: str = "tmp") -> Path:
    """The store ``writer`` builds from ``cdl`` as ``name.file`` (ncdump names the dataset after it); ``mode``
    is the script's URL mode without the storage (``nczarr``, ``zarr,noxarray``…).

    Raises WriteFailed with the writer's pinned failure.
    """
    store = tmp / f"{name}.file"
    url = nc_url(store, f"{mode},file")
    if store.exists():
        shutil.rmtree(store)
    try:
        if writer == "ncgen-4.9.0":
            built = ncgen(cdl, url, *ncgen_flags, cwd=cwd)
            if built.rc:
                raise WriteFailed(("ncgen", *built.failure))
        elif writer == "ours":
            write_ours(netcdf4_file(cdl, tmp), url)
        elif writer == "netcdf4-4.10.1":
            write_netcdf4(netcdf4_file(cdl, tmp), url, cwd)
        else:
            raise ValueError(writer)
    except WriteFailed as exc:
        raise WriteFailed(sanitised(exc.args[0], url, str(tmp))) from exc
    return store


# ---- readers -----------------------------------------------------------------------------------------------

def dump(reader: str, url: str, *args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None,
         timeout: float = TIMEOUT) -> Run:
    """ncdump 4.9.0 or nczarr-dump on ``url`` with ncdump's flags."""
    if reader == "ncdump-4.9.0":
        return run([require_tool("ncdump"), *args, url], env=env, cwd=cwd, timeout=timeout)
    if reader == "ours":
        return run([sys.executable, "-m", "nczarr_conformance.cli.dump", *args, url], env={**ours_env(), **(env or {})},
                   cwd=cwd)
    raise ValueError(reader)


#: netcdf-c's NC_ENOTBUILT message: the library lacks a feature (NCZarr zip needs libzip at build time)
NOT_BUILT = "Attempt to use feature that was not turned on when netCDF was built"


@functools.cache
def lacks_zip(reader: str) -> str | None:
    """Why ``reader`` cannot open an NCZarr zip store at all, or None when it can: asked, not assumed.

    The reader opens netcdf-c's own zip test store (``ref_quotes_orig.zip``, which run_interop.sh reads
    with ``mode=zarr,zip``); only netcdf-c's "not built" error (NC_ENOTBUILT) counts as no zip support,
    so a reader that opens it, or fails it any other way, runs the zip cells and is graded on them.
    """
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "ref_quotes.zip"
        shutil.copy(require(NCZARR_TEST / "ref_quotes_orig.zip"), store)
        url = nc_url(store, "zarr,zip")
        if reader == "netcdf4-4.10.1":
            netCDF4 = require_module("netCDF4")
            try:
                netCDF4.Dataset(url).close()
                return None
            except OSError as exc:
                error = f"errno {exc.errno}: {exc.strerror}"
        else:
            done = dump(reader, url, "-h")
            if done.rc == 0:
                return None
            error = sanitised(done.failure[1], url)
    return f"{reader} has no NCZarr zip support here: {error}" if NOT_BUILT in error else None


def normalise(text: str, *, ws: str = "b", drop: Iterable[str] = ()) -> list[str]:
    """Lines as ``sed -e '/RE/d' | diff -b`` (``ws="b"``), ``diff -w`` (``ws="w"``) or plain ``diff``
    (``ws="none"``) compares them."""
    patterns = [re.compile(p) for p in drop]
    lines = [line for line in text.splitlines() if not any(p.search(line) for p in patterns)]
    if ws == "none":
        return lines
    if ws == "w":
        return ["".join(line.split()) for line in lines]
    if ws == "b":
        return [" ".join(line.split()) for line in lines]
    raise ValueError(ws)


def text_diff(expected: str, actual: str, *, ws: str = "b", drop: Iterable[str] = ()) -> tuple[str, ...]:
    """The changed lines (``-expected`` / ``+actual``) after the script's normalisation; () when equal."""
    a, b = normalise(expected, ws=ws, drop=drop), normalise(actual, ws=ws, drop=drop)
    return tuple(line for line in difflib.unified_diff(a, b, lineterm="", n=0)
                 if line[:1] in "+-" and not line.startswith(("+++", "---")))


def _strip_attrs(group: Group, names: set[str]) -> None:
    for obj in [group, *group.variables.values()]:
        for name in names & set(obj.attributes):
            del obj.attributes[name]
    for sub in group.groups.values():
        _strip_attrs(sub, names)


def model_diff(expected_cdl: str, url: str, *, drop_attrs: Iterable[str] = (), data: bool = True,
               ignore: Mapping[str, str] = CDL_STATES_NO_STORAGE) -> tuple[str, ...]:
    """netCDF4-python 4.10.1's reading of ``url`` against the baseline parsed as CDL; () when equal.

    ``data=False`` for a header baseline (``ncdump -h``): it states no values."""
    require_module("netCDF4")
    from nczarr_conformance.errors import FormatError
    from nczarr_conformance.peers import netcdf4

    try:
        expected = parse_cdl(expected_cdl)[1]
    except FormatError as exc:  # our CDL parser lacks {…} data groups and some netcdf-c CDL; reported, issue 14
        pytest.skip(f"nczarr_conformance.cdl_parse cannot parse this baseline ({exc}): no model to compare")
    try:
        got = netcdf4.read(url, data=data)
    except Exception as exc:
        return ("read failed", type(exc).__name__, " ".join(str(exc).split()))
    for model in (expected, got):
        _strip_attrs(model.root, set(drop_attrs))
    return tuple(diff(expected, got, data=data, ignore=ignore))


def read_outcome(reader: str, expected: str, url: str, dump_args: tuple[str, ...] = (), *, ws: str = "b",
                 drop: Iterable[str] = (), drop_attrs: Iterable[str] = (),
                 env: Mapping[str, str] | None = None) -> Any:
    """PASS, or exactly how ``reader`` fails or differs from the baseline ``expected``."""
    if reader == "netcdf4-4.10.1":
        found = model_diff(expected, url, drop_attrs=drop_attrs, data="-h" not in dump_args)
        return sanitised(found, url) or PASS
    done = dump(reader, url, *dump_args, env=env)
    if done.rc:
        return sanitised(done.failure, url)
    return text_diff(expected, done.out, ws=ws, drop=drop) or PASS


def sanitised(outcome: Any, *urls: str) -> Any:
    """The outcome without this run's temporary paths and tool locations (``<url>``, ``ncdump:``)."""
    if isinstance(outcome, (list, tuple)):
        return type(outcome)(sanitised(x, *urls) for x in outcome)
    if isinstance(outcome, str):
        for url in urls:
            outcome = outcome.replace(url, "<url>").replace(url.split("#")[0].removeprefix("file://"), "<path>")
        return re.sub(r"(?<![\w.-])/\S*/(ncdump|ncgen|nccopy):", r"\1:", outcome)
    return outcome


# ---- expectations ------------------------------------------------------------------------------------------

KNOWN_DIR = Path(__file__).parent / "known"


KINDS = ("peer", "ours-by-design")


@dataclass(frozen=True, slots=True)
class Known:
    """A cell known not to pass: ``outcome`` exactly, and why.

    ``kind="peer"``: the peer (netcdf-c 4.9.0 or 4.10.1) is wrong against nczarr.md or its own
    baseline: a strict xfail raising PeerStillWrong on exactly ``outcome``. ``kind="ours-by-design"``:
    ours differs from netcdf-c's baseline by a documented choice: the cell asserts exactly that
    difference (and passes), so any other change shows.

    A cell whose diff holds both (a peer's fault and one of our documented choices) is split: its
    ``by_design`` lines are ours (asserted present, outside the xfail: our choice changing fails the
    cell), and the rest must be exactly the peer's ``outcome`` (the strict xfail), so that a fixed
    peer leaves only our lines and XPASSes, red, instead of hiding behind them.
    """

    outcome: Any
    reason: str
    kind: str = "peer"
    by_design: tuple[str, ...] = ()
    by_design_reason: str = ""


def _known(cell: str, entry: Mapping[str, Any], where: str) -> Known:
    """One entry of a known file: {"kind", "reason", "outcome"}, or {"parts": [a peer part, an ours-by-design part]}."""
    if "parts" not in entry:
        assert entry["kind"] in KINDS, f"{where}: {cell}: kind must be one of {KINDS}: {entry['kind']}"
        return Known(entry["outcome"], entry["reason"], entry["kind"])
    parts = {part["kind"]: part for part in entry["parts"]}
    assert sorted(parts) == sorted(KINDS) and len(entry["parts"]) == 2, \
        f"{where}: {cell}: a split cell has one part of each kind {KINDS}"
    peer, ours = parts["peer"], parts["ours-by-design"]
    overlap = set(peer["outcome"]) & set(ours["outcome"])
    assert not overlap and ours["outcome"], f"{where}: {cell}: the parts' lines must be disjoint: {overlap}"
    return Known(peer["outcome"], peer["reason"], "peer", tuple(ours["outcome"]), ours["reason"])


def load_known(script: str) -> dict[str, Known]:
    """``known/<script>.json``: cell id → {"outcome": exact failure as JSON, "reason": …, "kind": …}, or a split
    cell's {"parts": [{"kind": "peer", …}, {"kind": "ours-by-design", …}]} (see Known)."""
    path = KNOWN_DIR / f"{script}.json"
    if not path.exists():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {cell: _known(cell, entry, path.name) for cell, entry in data.items()}


def as_json(outcome: Any) -> Any:
    """The outcome as the known files hold it (tuples become lists)."""
    return json.loads(json.dumps(outcome))


def _record(request: pytest.FixtureRequest, seen: Any) -> None:
    """PORT_RECORD=DIR: keep every observed outcome (for curating known/*.json; never in CI)."""
    where = os.environ.get("PORT_RECORD")
    if where:
        with open(Path(where) / "observed.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"node": request.node.nodeid, "outcome": seen}) + "\n")


def settle(request: pytest.FixtureRequest, outcome: Callable[[], Any], known_cells: Mapping[str, Known]) -> None:
    """Assert the cell: PASS, the known peer failure exactly (strict xfail), or ours' documented difference.

    The cell's entry in ``known/<script>.json`` is keyed by the test's name (``test_x[params]``).
    """
    known = known_cells.get(request.node.name)
    if known is not None and known.kind == "peer":
        request.applymarker(pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason=known.reason))
    seen = as_json(outcome())
    _record(request, seen)
    judge(known, seen)


def judge(known: Known | None, seen: Any) -> None:
    """Return when the cell holds (PASS; ours' documented difference; a fixed peer, which the strict xfail turns
    red); raise PeerStillWrong when the peer is still exactly as wrong as known; AssertionError otherwise."""
    if known is None:
        assert seen == PASS, seen
    elif known.kind == "ours-by-design":
        assert seen == known.outcome, f"ours changed: {seen!r} (documented: {known.reason})"
    elif known.by_design:
        lost = [line for line in known.by_design if not isinstance(seen, list) or line not in seen]
        assert not lost, f"ours changed: {lost!r} no longer in {seen!r} (documented: {known.by_design_reason})"
        rest = [line for line in seen if line not in known.by_design]
        still_wrong(rest, wrong=known.outcome, right=[])
    else:
        assert known.kind == "peer", known.kind
        still_wrong(seen, wrong=known.outcome, right=PASS)


# ---- unpacking netcdf-c's archives -------------------------------------------------------------------------

def unzip(archive: Path, into: Path) -> Path:
    """Extract as the scripts' ``unzip`` does; the members must stay inside ``into``."""
    with zipfile.ZipFile(archive) as zf:
        for name in zf.namelist():
            target = (into / name).resolve()
            assert target.is_relative_to(into.resolve()), name
        zf.extractall(into)
    return into


def untar(archive: Path, into: Path) -> Path:
    with tarfile.open(archive) as tf:
        tf.extractall(into, filter="data")
    return into


def read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="surrogateescape")


def require(path: Path) -> Path:
    """A baseline or data file the port needs: its absence is a failure, not a skip."""
    assert path.exists(), f"missing netcdf-c test data {path} (corpus/netcdf-c/README.md)"
    return path


def dataset_groups(model: Dataset) -> list[str]:
    out: list[str] = []

    def walk(g: Group, path: str) -> None:
        out.append(path)
        for name, sub in g.groups.items():
            walk(sub, f"{path.rstrip('/')}/{name}")

    walk(model.root, "/")
    return out


# ---- the usual step: a CDL written by each writer, dumped by each reader, diffed with a baseline -----------

@dataclass(frozen=True, slots=True)
class Step:
    """One ncgen → store → ncdump → diff step of a script.

    ``source`` and ``baseline`` are paths under corpus/netcdf-c; ``name`` is the store's name (ncdump
    names the dataset after it); ``drop`` are the script's ``sed '/RE/d'`` lines; ``ws`` its diff flag.
    """

    source: str
    baseline: str
    name: str
    write_mode: str
    read_mode: str
    dump_args: tuple[str, ...] = ()
    ws: str = "b"
    drop: tuple[str, ...] = ()
    ncgen_flags: tuple[str, ...] = ("-4", "-b")


def run_step(request: pytest.FixtureRequest, stores: Any, script: str, step_id: str, step: Step, writer: str,
             reader: str, known: Mapping[str, Known], *, rc: str | None = None) -> None:
    """One cell: ``writer`` builds ``step.source``, ``reader`` reads it, the baseline matches (or the known
    failure, exactly). ``rc``: text of a ``.ncrc`` the script creates in its working directory."""
    cdl = require(NETCDF_C / step.source)
    expected = read_text(require(NETCDF_C / step.baseline))

    def make(tmp: Path) -> Path:
        cwd = None
        if rc is not None:
            cwd = tmp / "cwd"
            cwd.mkdir()
            (cwd / ".ncrc").write_text(rc)
        return build(writer, cdl, tmp, step.write_mode, ncgen_flags=step.ncgen_flags, cwd=cwd, name=step.name)

    store, failed = stores.get(f"{script}-{step_id}-{writer}", make)

    def outcome() -> Any:
        if failed is not None:
            return failed
        return read_outcome(reader, expected, nc_url(store, f"{step.read_mode},file"), step.dump_args, ws=step.ws,
                            drop=step.drop, drop_attrs=[d.lstrip(":") for d in step.drop if d.startswith(":")])

    settle(request, outcome, known)
