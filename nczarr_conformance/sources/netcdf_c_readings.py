"""netcdf-c's readings of a fix's probes, in a process of their own (fix/verify.py keeps one as a worker,
``python -m nczarr_conformance.sources.netcdf_c_readings --serve``; ``… PROBE_DIR FLAVOR`` reads one probe
pair and exits): on hostile metadata netcdf-c can crash the process that opens a store, and a crash must cost
the check its verdict, never the fix its promise of one stderr line.

A module of its own, importing numpy, netCDF4-python and nothing of the fixes, and a worker kept for the
process's fixes: a child started per fix cost about 0.45 s of imports (22 fixes in a report), this one
0.35 s once. The readings' types and helpers live here so that the child and the verdict share them.
"""
from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nczarr_conformance import keys
from nczarr_conformance.urls import to_file_url


@dataclass(frozen=True, slots=True)
class Reading:
    """What one reader got from one array: its first chunk's values, or why it could not."""

    values: np.ndarray | None = None
    error: str | None = None
    #: "char" or "string" for text (:func:`text_kind`): the normalised values do not tell the two apart
    kind: str | None = None


def text_kind(values: np.ndarray) -> str | None:
    """"char" for bytes (netCDF4-python's and our char: dtype S1), "string" for str (their string: object or U),
    None for anything else; a reader moving from one to the other reads another netCDF type, whatever the text."""
    if values.dtype.kind == "S":
        return "char"
    if values.dtype.kind == "U" or (values.dtype.kind == "O" and values.size
                                     and all(isinstance(v, str) for v in values.ravel().tolist()[:16])):
        return "string"
    return None


Readings = dict[str, Reading]  # array node → reading


def first_chunk_region(shape: tuple[int, ...], chunks: tuple[int, ...]) -> tuple[slice, ...]:
    """The first chunk's region in ``shape`` (the whole axis where the chunking does not fit)."""
    if len(chunks) != len(shape):
        chunks = tuple(1 for _ in shape)
    return tuple(slice(0, min(int(s), max(int(c), 1))) for s, c in zip(shape, chunks, strict=True))


def explain(exc: BaseException, root: Path | None = None) -> str:
    """One short line; the probe's own path is left out (it names a temporary nobody will see)."""
    text = " ".join(str(exc).split())
    if root is not None:
        for name in (to_file_url(str(root), "file", "nczarr"), to_file_url(str(root), "file", "zarr"), str(root)):
            text = text.replace(f"{name}: ", "").replace(name, "the store")
    return text[:200] or type(exc).__name__


def read_each(arrays: list[str], read_one: Callable[[str], np.ndarray], root: Path) -> Readings:
    """``read_one`` per array; any exception is that array's reading error (a reader's own types)."""
    out: Readings = {}
    for akey in arrays:
        try:
            values = np.asarray(read_one(akey))
            out[akey] = Reading(values=values, kind=text_kind(values))
        except Exception as exc:  # every reader raises its own types; each is a finding here
            out[akey] = Reading(error=explain(exc, root))
    return out


def normal(values: np.ndarray | None) -> np.ndarray:
    """Values comparable across readers: flat; text as str without trailing NULs; numbers as they are."""
    arr = np.asarray(values).ravel()
    if arr.dtype.kind in "SUO":
        return np.array([v.decode("utf-8", "replace").rstrip("\x00") if isinstance(v, bytes) else str(v).rstrip("\x00")
                         for v in arr.tolist()], dtype=object)
    return arr


def read_netcdf_c(root: Path, arrays: list[str], flavor: str) -> Readings:
    from nczarr_conformance.sources import netcdf4 as nc4

    mode = "zarr" if flavor == "zarr" else "nczarr"
    try:
        nc = nc4.open_nc(to_file_url(str(root), "file", mode))
    except Exception as exc:  # netCDF4's RuntimeError, OSError…: the reader could not open it
        return {a: Reading(error=explain(exc, root)) for a in arrays}
    try:
        def one(akey: str) -> np.ndarray:
            parts = keys.split(akey)
            group = nc
            with nc4.LOCK:
                for name in parts[:-1]:
                    group = group.groups[name]
                var = group.variables[parts[-1]]
                chunking = var.chunking()
                chunks = tuple(chunking) if isinstance(chunking, list) else tuple(var.shape)
            return nc4.read_values(var, first_chunk_region(tuple(var.shape), chunks) or None)

        return read_each(arrays, one, root)
    finally:
        nc4.close_nc(nc)


def save_readings(readings: Readings, arrays: list[str], path: Path) -> None:
    """Readings as an npz file (no pickles): ``v<i>`` the values of array i, ``errors`` and ``kinds`` JSON texts."""
    values: dict[str, np.ndarray] = {}
    errors: dict[str, str] = {}
    kinds: dict[str, str] = {}
    for i, akey in enumerate(arrays):
        r = readings[akey]
        if r.error is not None or r.values is None:
            errors[akey] = r.error or "no values"
            continue
        if r.kind is not None:
            kinds[akey] = r.kind
        arr = normal(r.values)
        values[f"v{i}"] = np.array(arr.tolist(), dtype=str) if arr.dtype.kind == "O" else arr
    tmp = path.with_suffix(".tmp.npz")
    values["errors"] = np.array(json.dumps(errors))
    values["kinds"] = np.array(json.dumps(kinds))
    np.savez(tmp, **values)  # type: ignore[arg-type]
    os.replace(tmp, path)


def load_readings(path: Path, arrays: list[str]) -> Readings | None:
    if not path.exists():
        return None
    with np.load(path, allow_pickle=False) as data:
        errors = json.loads(str(data["errors"]))
        kinds = json.loads(str(data["kinds"])) if "kinds" in data.files else {}
        return {akey: Reading(error=errors[akey]) if akey in errors
                else Reading(values=data[f"v{i}"], kind=kinds.get(akey))
                for i, akey in enumerate(arrays)}


def _child(top: Path, flavor: str) -> None:
    """The child's work: netcdf-c's readings of ``top/before`` then ``top/after``, each saved at once."""
    arrays = json.loads((top / "arrays.json").read_text())
    for state in ("before", "after"):
        save_readings(read_netcdf_c(top / state, arrays, flavor), arrays, top / f"netcdf-c-{state}.npz")


def _serve() -> None:
    """``--serve``: answer one request a line, ``{"id": ID, "top": PROBE_DIR, "flavor": F}``, with
    ``{"id": ID, "stdout": ""}``
    once both readings are saved (the protocol of nczarr_conformance/workers.py): netCDF4-python is imported
    once for every fix a process checks. A Python error is that request's exit 1 with its traceback; a crash
    of netcdf-c ends the worker, as it ends a one-shot child."""
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            _child(Path(request["top"]), str(request["flavor"]))
            reply: dict[str, object] = {"id": request.get("id"), "stdout": ""}
        except Exception:
            reply = {"id": request.get("id"), "exit": 1, "stderr": traceback.format_exc()}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        _serve()
    else:
        _child(Path(sys.argv[1]), sys.argv[2])
