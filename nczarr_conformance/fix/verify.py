"""Before a fix writes anything: read the store before and after the edits with every reader at hand,
and refuse the edits when one of them reads worse.

Why: each fix is meant for some readers, and a rule written from what those readers did once can
miss a case (an entry zarr-python refuses makes it refuse the whole group through a ``.zmetadata``;
a wrong fill changes every unwritten cell). Asking the readers themselves is the only check that
does not share the fix's assumptions.

Bounded: the check reads a *probe*, a private temporary directory (beside a local store, never in
it; for S3 and ``--out`` in the system's temporary directory) holding every metadata object and the
first chunk of each array (at most :data:`SAMPLE_BYTES` stored bytes per chunk,
:data:`TOTAL_SAMPLE_BYTES` in all), once as stored and once as edited (re-encoded chunks
re-encoded). Each reader opens it and reads each array's first chunk region. The readers are the
ones at hand in Python: ours, zarr-python when the fix targets zarr-python or xarray (which reads
through it), and netCDF4-python (netcdf-c 4.10, which must read every fixed store right). netcdf-c
runs in one child process reading both probes (``python -m nczarr_conformance.sources.netcdf_c_readings``): on
hostile metadata it can crash the process that opens it, and a crash must cost the check its
verdict ("netcdf-c crashed on the edited store"), never the fix its promise of one stderr line. A
reader that is not installed is skipped.

An edit reads worse when a reader that read an array before cannot after, or reads other values
after, unless (a) those values are what netcdf-c (else our reader) read before: a fix may move a
reader towards netcdf-c, never away; or (b) only the fill changed, and to the variable's netCDF fill:
the same cells read the fill before (the declared ``fill_value`` or ``_FillValue``) and after (now the
``_FillValue`` attribute, else netCDF's default for the type), every other cell the same value
(``NCZ-FIX-FILL-EXACT`` replaces netcdf-c's ``%g``-rounded default with the exact one, which netcdf-c
then reads too).
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from nczarr_conformance import keys, limits, safety
from nczarr_conformance.errors import NczarrError, StoreError, UsageError
from nczarr_conformance.fix.plan import Plan
from nczarr_conformance.nczarr.dtypes import DEFAULT_FILL, parse_dtype
from nczarr_conformance.sources import netcdf_c_readings
from nczarr_conformance.sources.netcdf_c_readings import (
    Reading,
    Readings,
    explain,
    first_chunk_region,
    load_readings,
    normal,
    read_each,
)
from nczarr_conformance.stores import DirectoryStore
from nczarr_conformance.stores.base import Store
from nczarr_conformance.workers import WorkerPool, WorkerProtocolError

SAMPLE_BYTES = 16 * 1024**2
TOTAL_SAMPLE_BYTES = 64 * 1024**2
_FIRST_CHUNK = re.compile(r"^0(\.0)*$")


ReaderFunction = Callable[[Path, list[str], str], Readings]


def check_readers(store: Store, plan: Plan, where: str, *, beside: Path | None = None) -> None:
    """Raise UsageError (one line, nothing written) when an edit of ``plan`` reads worse; see the module.

    ``beside``: a local store's resolved path, next to which the probe is made under the store's
    temporary prefix, so that the probe of a killed run is one of the leftovers the next run
    removes; otherwise (S3, ``--out``) it goes to the system's temporary directory.
    """
    if plan.empty:
        return
    arrays = sorted(keys.parent(k) for k in plan.all_keys if keys.basename(k) == ".zarray")
    readers = available_readers(plan.targets)
    with _probe_dirs(beside) as top:
        samples = _sample_keys(store, plan, arrays)
        _write_probes(top, store, plan, samples, where)
        fills = {akey: (_fills(top / "before", akey, declared=True), _fills(top / "after", akey, declared=False))
                 for akey in arrays}
        before: dict[str, Readings] = {}
        after: dict[str, Readings] = {}
        if importlib.util.find_spec("netCDF4") is not None:
            before["netcdf-c"], after["netcdf-c"] = _netcdf_c_in_a_child(top, arrays, plan.flavor)
        for name, read in readers.items():
            before[name] = read(top / "before", arrays, plan.flavor)
            after[name] = read(top / "after", arrays, plan.flavor)
    problems = worse(before, after, fills, losses=plan.losses)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UsageError(f"{where}: refused: after the edits {problems[0]}{more}; nothing was changed")


def check_migration(store: Store, plan: Plan, where: str, *, beside: Path | None = None) -> None:
    """``--to-v3``: refuse (UsageError, one line, nothing written) unless our v3 reader and zarr-python 3
    read every array's first chunk region of the migrated probe as netcdf-c (else our v2 reader) read it
    from the v2 one. netcdf-c reads no v3, so the readers before and after differ; the reference is
    the fixes' one."""
    arrays = sorted(keys.parent(k) for k in plan.all_keys if keys.basename(k) == ".zarray")
    with _probe_dirs(beside) as top:
        _write_probes(top, store, plan, _sample_keys(store, plan, arrays), where)
        reference = read_ours(top / "before", arrays, plan.flavor)
        if importlib.util.find_spec("netCDF4") is not None:
            netcdf_c, _ = _netcdf_c_in_a_child(top, arrays, plan.flavor)  # its reading of v3 is no verdict
            reference.update({a: r for a, r in netcdf_c.items() if r.values is not None})
        after = {"nczarr-conformance": read_ours_v3(top / "after", arrays, plan.flavor)}
        if importlib.util.find_spec("zarr") is not None:
            after["zarr-python"] = read_zarr_python(top / "after", arrays, "zarr-v3")
    problems = []
    for name, readings in after.items():
        for akey, ref in reference.items():
            got = readings[akey]
            if ref.values is None:
                continue
            if got.error is not None:
                problems.append(f"{name} cannot read {akey} ({got.error})")
            elif not same(ref.values, got.values):
                problems.append(f"{name} reads other values from {akey} than the v2 store held")
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UsageError(f"{where}: --to-v3 refused: in Zarr v3 {problems[0]}{more}; nothing was changed")


def available_readers(targets: frozenset[str]) -> dict[str, ReaderFunction]:
    """The readers run in this process, by name (netcdf-c runs in a child, see the module)."""
    out: dict[str, ReaderFunction] = {"nczarr-conformance": read_ours}
    if targets & {"zarr-python", "xarray"} and importlib.util.find_spec("zarr") is not None:
        out["zarr-python"] = read_zarr_python
    return out


@contextmanager
def _probe_dirs(beside: Path | None) -> Iterator[Path]:
    """A fresh private directory holding ``before`` and ``after`` (see :func:`check_readers` for where),
    removed on any exit."""
    top = safety.make_temp_dir(beside) if beside is not None else Path(tempfile.mkdtemp(prefix="nczarr-fix-probe-"))
    try:
        (top / "before").mkdir()
        (top / "after").mkdir()
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


CHILD_TIMEOUT = 300
_CHILDREN = WorkerPool([sys.executable, "-m", netcdf_c_readings.__name__, "--serve"], lambda: os.environ, None)


def _netcdf_c_in_a_child(top: Path, arrays: list[str], flavor: str) -> tuple[Readings, Readings]:
    """netcdf-c's readings of both probes, read by a child process (see the module docstring), a worker
    kept for this process's later fixes.

    The child saves the ``before`` readings before it opens ``after``, so a crash is placed: on
    ``before``, netcdf-c read nothing before either (it is left out of the comparison); on
    ``after``, every array it read before is one it cannot read now.
    """
    (top / "arrays.json").write_text(json.dumps(arrays))
    try:
        status, _, said = _CHILDREN.call({"top": str(top), "flavor": flavor}, CHILD_TIMEOUT)
    except OSError as exc:
        status, said = 1, f"cannot start {sys.executable}: {exc.strerror or exc}".encode()
    except WorkerProtocolError as exc:
        status, said = 1, str(exc).encode()
    crashed = f"netcdf-c did not finish in {CHILD_TIMEOUT} s" if status is None else _crash(status, said)
    before = load_readings(top / "netcdf-c-before.npz", arrays)
    if before is None:
        return ({a: Reading(error=crashed) for a in arrays},) * 2
    after = load_readings(top / "netcdf-c-after.npz", arrays)
    if after is None:
        after = {a: Reading(error=crashed) for a in arrays}
    return before, after


def _crash(code: int, stderr: bytes) -> str:
    last = (stderr.decode("utf-8", "replace").strip().splitlines() or [""])[-1]
    how = f"killed by signal {-code}" if code < 0 else f"exit {code}"
    return f"netcdf-c crashed ({how}{': ' + last[:120] if last else ''})"


def _sample_keys(store: Store, plan: Plan, arrays: list[str]) -> list[str]:
    """The first chunk's key of each array (``0``, ``0.0``, ``0/0``…) that exists, within the budgets."""
    nodes = set(arrays)
    out: list[str] = []
    for key in plan.all_keys:
        node = keys.parent(key)
        while node not in nodes and node != "/":
            node = keys.parent(node)
        if node not in nodes or keys.basename(key).startswith("."):
            continue
        rest = key[len(node.rstrip("/")) + 1:]
        if _FIRST_CHUNK.match(rest.replace("/", ".")):
            out.append(key)
    return out


def _write_probes(top: Path, store: Store, plan: Plan, samples: list[str], where: str) -> None:
    """``top/before``: every metadata object and the sampled chunks as stored; ``top/after``: the same as
    the plan leaves them (unedited objects are hard links to ``before``'s)."""
    new = {e.key: e.new for e in plan.edits}
    recode = {k: r for r in plan.recodes for k in r.chunks}
    stored: dict[str, bytes] = {}
    for key in sorted(k for k in plan.all_keys if keys.basename(k).startswith(".")):
        data = plan.raw[key] if key in plan.raw else store.get(key)
        if data is not None:
            stored[key] = data
    budget = TOTAL_SAMPLE_BYTES
    for key in samples:
        try:
            data = store.get(key, min(SAMPLE_BYTES, budget))
        except limits.LimitError:
            continue  # too big to sample: the array is then compared by its metadata and fill only
        if data is not None:
            budget -= len(data)
            stored[key] = data
    made: set[Path] = set()
    for key, data in stored.items():
        _put(top / "before", key, data, where, made)
        if key in recode:
            _put(top / "after", key, recode[key].reencode(key, data), where, made)
        elif key not in new:
            _put(top / "after", key, None, where, made, link_from=top / "before")
    for key, data in new.items():
        if data is not None:
            _put(top / "after", key, data, where, made)


def _put(root: Path, key: str, data: bytes | None, where: str, made: set[Path], *,
         link_from: Path | None = None) -> None:
    """Write ``data`` at ``key`` under ``root``, or hard-link the same key of ``link_from``."""
    path = root.joinpath(*keys.split(key))
    try:
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(path.parent)
        if link_from is not None:
            os.link(link_from.joinpath(*keys.split(key)), path)
        else:
            with open(path, "wb") as fh:
                fh.write(data or b"")
    except OSError as exc:
        raise StoreError(f"{where}: cannot copy {key.lstrip('/')} into {root.parent} for the reader check: "
                         f"{exc.strerror or exc}") from exc


def _read_with_ours(reader_type: Any, root: Path, arrays: list[str]) -> Readings:
    """Each array read whole by one of our readers (the v2 ``DatasetReader`` or the v3 ``V3Reader``: both
    expose ``arrays`` and ``read_region``); a store the reader refuses is that finding for every array."""
    with DirectoryStore(root, "r") as store:
        try:
            reader = reader_type(store)
        except NczarrError as exc:
            return {a: Reading(error=explain(exc, root)) for a in arrays}

        def one(akey: str) -> np.ndarray:
            info = reader.arrays[akey]
            region = () if info.scalar else first_chunk_region(info.zshape, info.chunks)
            return np.asarray(reader.read_region(akey, region))

        return read_each(arrays, one, root)


def read_ours(root: Path, arrays: list[str], flavor: str) -> Readings:
    from nczarr_conformance.nczarr.reader import DatasetReader

    return _read_with_ours(DatasetReader, root, arrays)


def read_ours_v3(root: Path, arrays: list[str], flavor: str) -> Readings:
    """Our Zarr v3 reader's readings (``--to-v3``'s migrated probe)."""
    from nczarr_conformance.zarr3.reader import V3Reader

    return _read_with_ours(V3Reader, root, arrays)


def read_zarr_python(root: Path, arrays: list[str], flavor: str) -> Readings:
    import zarr

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            group = zarr.open_group(str(root), mode="r", zarr_format=3 if flavor == "zarr-v3" else 2)
    except Exception as exc:  # zarr-python raises ValueError, TypeError, KeyError…
        return {a: Reading(error=explain(exc, root)) for a in arrays}

    def one(akey: str) -> np.ndarray:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            arr: Any = group[akey.lstrip("/")]
            return np.asarray(arr[first_chunk_region(tuple(arr.shape), tuple(arr.chunks))])

    return read_each(arrays, one, root)


Fills = dict[str, tuple[list[Any], list[Any]]]  # array node → (fills before, fills after)


def _fills(root: Path, akey: str, *, declared: bool) -> list[Any]:
    """The values a cell holding the fill reads as: the ``_FillValue`` attribute, else netCDF's default
    for the type, and (``declared``) the ``.zarray`` fill_value; [] when the metadata does not parse."""
    try:
        zarray = json.loads((root.joinpath(*keys.split(akey)) / ".zarray").read_bytes())
        attrs_path = root.joinpath(*keys.split(akey)) / ".zattrs"
        zattrs = json.loads(attrs_path.read_bytes()) if attrs_path.exists() else {}
        nctype = parse_dtype(zarray.get("dtype"), u1_is_char=True).nctype
    except (OSError, ValueError, AttributeError, NczarrError):
        return []
    attr = zattrs.get("_FillValue") if isinstance(zattrs, dict) else None
    if isinstance(attr, list) and len(attr) == 1:
        attr = attr[0]
    out = [attr if attr is not None else DEFAULT_FILL.get(nctype)]
    if declared:
        out.append(zarray.get("fill_value"))
    return [v for v in out if v is not None]


def _is_fill(values: np.ndarray, fills: list[Any]) -> np.ndarray | None:
    """Which numeric cells hold one of ``fills`` (compared in the values' dtype, NaN included); None for text."""
    if values.dtype.kind not in "iuf":
        return None
    mask = np.zeros(values.shape, dtype=bool)
    for fill in fills:
        if isinstance(fill, str) and fill in ("NaN", "Infinity", "-Infinity"):
            fill = float(fill.replace("Infinity", "inf"))
        if isinstance(fill, bool) or not isinstance(fill, (int, float)):
            continue
        if isinstance(fill, float) and np.isnan(fill):
            mask |= np.isnan(values) if values.dtype.kind == "f" else False
            continue
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                held = np.array(fill).astype(values.dtype)
            except (OverflowError, ValueError):
                continue
        mask |= values == held
    return mask


def _only_the_fill(b: np.ndarray, a: np.ndarray, fills: tuple[list[Any], list[Any]]) -> bool:
    """The same cells read a fill before and after, and every other cell the same value (see the module)."""
    x, y = np.asarray(b).ravel(), np.asarray(a).ravel()
    was, now = _is_fill(x, fills[0]), _is_fill(y, fills[1])
    if was is None or now is None or x.shape != y.shape or not np.array_equal(was, now):
        return False
    return same(x[~was], y[~now])


def worse(before: dict[str, Readings], after: dict[str, Readings], fills: Fills | None = None, *,
          losses: Mapping[str, str] | None = None) -> list[str]:
    """What some reader reads worse after the edits, one phrase per array and reader.

    A reader that read char and now reads string (or the reverse) reads worse even where the text did not
    change: another netCDF type. ``losses`` (the plan's: arrays where a fix the user chose states that loss)
    accepts exactly char → string with unchanged text there, nothing else."""
    reference = before.get("netcdf-c") or before.get("nczarr-conformance") or {}
    out: list[str] = []
    for name, was in before.items():
        now = after[name]
        for akey, b in was.items():
            a = now[akey]
            if b.error is not None:
                continue
            if a.error is not None:
                out.append(f"{name} cannot read {akey} ({a.error}), which it read before")
                continue
            if b.kind is not None and a.kind is not None and b.kind != a.kind and not (
                    losses and akey in losses and (b.kind, a.kind) == ("char", "string")
                    and same(b.values, a.values)):
                out.append(f"{name} reads {akey} as {a.kind}, not {b.kind} as before")
                continue
            if same(b.values, a.values):
                continue
            if fills and akey in fills and b.values is not None and a.values is not None \
                    and _only_the_fill(b.values, a.values, fills[akey]):
                continue
            ref = reference.get(akey)
            if ref is not None and ref.values is not None and same(ref.values, a.values):
                continue  # moved towards netcdf-c: what the fix is for
            out.append(f"{name} reads other values from {akey} than before")
    return out


def same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    """Equal values (NaN equal to NaN, text compared as text), whatever each reader's dtype."""
    x, y = normal(a), normal(b)
    if x.shape != y.shape:
        return False
    if x.dtype.kind == "O" or y.dtype.kind == "O":
        return bool(x.dtype.kind == y.dtype.kind and all(p == q for p, q in zip(x.tolist(), y.tolist(), strict=True)))
    try:
        return bool(np.array_equal(x, y, equal_nan=x.dtype.kind in "fc" and y.dtype.kind in "fc"))
    except TypeError:
        return False
