"""``nc2nczarr --verify`` and ``nczarr-check --readers``: open a store with each reader for real.

The matrix's peers do the reading (the same adapters, serve workers included, that grade every cell), so a
verdict here is a matrix cell on the user's own store: compared with what netCDF4-python reads from the
source file (``--verify``), or, without a source, whether the reader opens the store and reads one chunk per
array (``--readers``). The comparison is the matrix's view (conformance/views.py) with one loosening a user
would make: a pure-Zarr reader cannot tell a one-element attribute from its element, so neither side keeps
that difference.
"""
from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nczarr_conformance.conformance.views import view
from nczarr_conformance.model import Dataset, diff_json
from nczarr_conformance.peers import implementations  # noqa: F401  (registers the built-in peers)
from nczarr_conformance.peers.base import PEERS, Peer

MAX_SAID = 3


@dataclass
class Verdict:
    """What one reader did with the store."""

    reader: str
    #: "equal" (read equal to the source), "opens" (read, nothing to compare with), "differs", "fails" (could not
    #: open or read), "absent" (not here)
    status: str
    said: str = ""

    def line(self) -> str:
        text = {"equal": "opened equal", "opens": "opens it", "differs": "read differently",
                "fails": "cannot read it", "absent": "not installed here"}[self.status]
        return f"{self.reader}: {text}{': ' + self.said if self.said else ''}"


def _outside_peers() -> dict[str, Peer]:
    """The implementations nczarr-conformance.toml declares in the working directory (netcdf-c 4.9.0's tools
    in a checkout), by id; none outside a checkout."""
    from nczarr_conformance.peers.command import build, find_config, load_config

    try:
        config = find_config(None)
        return {p.id: p for p in build(load_config(config))} if config is not None else {}
    except Exception:  # a broken config is the report command's to word; here it only hides those readers
        return {}


@contextlib.contextmanager
def readers(ids: list[str]) -> Iterator[dict[str, Peer | None]]:
    """The peers for ``ids`` (None where none is here), closed after use."""
    outside = _outside_peers() if any(i not in PEERS for i in ids) else {}
    found: dict[str, Peer | None] = {i: PEERS.get(i) or outside.get(i) for i in ids}
    try:
        yield found
    finally:
        for peer in found.values():
            if peer is not None:
                peer.close()


def _loose(doc: Any) -> Any:
    """One-element lists as their element, all the way down (pure Zarr cannot tell them apart)."""
    if isinstance(doc, dict):
        return {k: _loose(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return _loose(doc[0]) if len(doc) == 1 else [_loose(v) for v in doc]
    return doc


def _undefined_as_intended(intended: Dataset, seen: Dataset) -> None:
    """A NOFILL variable's never-written values are undefined (netcdf-c hands back whatever memory held, another
    value on each read): its values are not compared, so ``seen`` takes the intended ones where it has the variable."""
    for gkey, group in intended.root.walk():
        target = seen.root
        for name in [p for p in gkey.split("/") if p]:
            target = target.groups.get(name)  # type: ignore[assignment]
            if target is None:
                break
        for name, var in group.variables.items() if target is not None else ():
            other = target.variables.get(name)
            if var.no_fill and other is not None and other.data is not None and var.data is not None \
                    and other.data.size == var.data.size:
                other.data = var.data


def differences(intended: Dataset, seen: Dataset, peer: Peer) -> list[str]:
    """What ``peer`` read differently from ``intended``: the whole netCDF model when the reader speaks netCDF (the
    source is a netCDF file, whatever the layout: a netCDF user expects its types and dimensions back), else its
    arrays and untyped attributes."""
    kind = "netcdf" if peer.model == "netcdf" else "zarr"  # a netCDF reader is held to the netCDF source
    _undefined_as_intended(intended, seen)
    first = view(intended, kind, root_only=peer.root_only, attributes=peer.attributes)
    second = view(seen, kind, root_only=peer.root_only, attributes=peer.attributes)
    if kind == "zarr":
        first, second = {**first, "attributes": _loose(first.get("attributes", {}))}, \
            {**second, "attributes": _loose(second.get("attributes", {}))}
    return diff_json(first, second, limit=10**6)


def _values_differ(a: Any, b: Any) -> bool:
    import numpy as np

    left, right = np.asarray(a), np.asarray(b)
    if left.shape != right.shape:
        return True
    if left.dtype.kind in "fc" and right.dtype.kind in "fc":
        return not np.array_equal(left, right, equal_nan=True)
    if left.dtype.kind in "OSUT" or right.dtype.kind in "OSUT":  # text: as str, whatever object/bytes/str it came as
        def text(v: Any) -> str:
            return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
        return [text(v) for v in left.ravel()] != [text(v) for v in right.ravel()]
    return not np.array_equal(left, right)


def _unlike_attributes(first: dict[str, Any], second: dict[str, Any]) -> list[str]:
    """The attribute names whose values differ or that only one side has, array values compared element by
    element (``==`` on arrays is no answer), numbers by value whatever their width."""
    import numpy as np

    return sorted(k for k in set(first) | set(second)
                  if k not in first or k not in second or _values_differ(np.asarray(first[k]), np.asarray(second[k])))


def xarray_decoded_differences(url: str, source: str, undefined: frozenset[str] = frozenset()) -> list[str]:
    """What ``xarray.open_zarr(store)`` decodes differently from ``xarray.open_dataset(source)`` (netCDF4 engine,
    xarray's defaults both: masking, scaling, times, char): the store as an xarray user sees it, against that
    user's view of the source file. The root group's attributes; dimensions, dtype kind, values (NaN matching NaN)
    and attributes of every variable of the root group; ``undefined``: variables whose values are not compared
    (NOFILL: what no one wrote is undefined)."""
    import xarray as xr

    from nczarr_conformance.peers.common import zarr_store
    from nczarr_conformance.sources.netcdf4 import LOCK

    with LOCK:  # xarray's netcdf4 engine locks its own calls, not against ours: open, reads and close hold ours
        return _xarray_differences(xr.open_zarr(zarr_store(url), consolidated=None, chunks=None),
                                   xr.open_dataset(source, engine="netcdf4"), undefined)


def _xarray_differences(mine: Any, theirs: Any, undefined: frozenset[str]) -> list[str]:
    """:func:`xarray_decoded_differences` of the two datasets opened, both closed before it returns."""
    out: list[str] = []
    try:
        unlike = _unlike_attributes(dict(mine.attrs), dict(theirs.attrs))
        if unlike:
            out.append(f"xarray: global attributes {', '.join(unlike)} differ from the netCDF4 engine's")
        for name in sorted(map(str, set(theirs.variables) | set(mine.variables))):
            if name not in mine.variables or name not in theirs.variables:
                out.append(f"xarray: {name}: only in {'the source' if name in theirs.variables else 'the store'}")
                continue
            a, b = mine[name], theirs[name]
            text = a.dtype.kind in "OSUT" and b.dtype.kind in "OSUT"  # T: numpy 2's StringDType
            if a.dims != b.dims:
                out.append(f"xarray: {name}: dimensions {a.dims} != {b.dims} (netCDF4 engine)")
            elif a.dtype != b.dtype and not text:
                out.append(f"xarray: {name}: dtype {a.dtype} != {b.dtype} (netCDF4 engine)")
            elif name not in undefined and _values_differ(a.values, b.values):
                out.append(f"xarray: {name}: values differ from the netCDF4 engine's")
            unlike = _unlike_attributes(dict(a.attrs), dict(b.attrs))
            if unlike:
                out.append(f"xarray: {name}: attributes {', '.join(unlike)} differ from the netCDF4 engine's")
    finally:
        mine.close()
        theirs.close()
    return out


def _readings(url: str, ids: list[str]) -> Iterator[tuple[str, Peer, Dataset] | Verdict]:
    """Each reader of ``ids`` reads ``url``: (id, peer, what it read), or the verdict that ends it there (not here,
    or its own failure); the peers are closed after the last."""
    with readers(ids) as found, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for rid, peer in found.items():
            reason = peer.available() if peer is not None else "not a reader of this installation"
            if peer is None or reason:
                yield Verdict(rid, "absent", reason or "")
                continue
            try:
                seen = peer.read(url)
            except Exception as exc:  # the reader's own failure is the verdict
                yield Verdict(rid, "fails", _said(exc, url))
                continue
            yield rid, peer, seen


def verify(url: str, intended: Dataset, ids: list[str], source: str | None = None) -> list[Verdict]:
    """Each reader of ``ids`` reads ``url``; compared with ``intended`` (netCDF4-python's reading of the source).

    With the ``source`` file, ``xarray`` is also held to what a user of it sees: ``open_zarr`` with xarray's
    default decoding against ``open_dataset(source)`` (xarray_decoded_differences)."""
    out: list[Verdict] = []
    for reading in _readings(url, ids):
        if isinstance(reading, Verdict):
            out.append(reading)
            continue
        rid, peer, seen = reading
        diffs = differences(intended, seen, peer)
        if rid == "xarray" and source is not None:
            try:
                nofill = frozenset(n for n, v in intended.root.variables.items() if v.no_fill)
                diffs += xarray_decoded_differences(url, source, nofill)
            except Exception as exc:  # xarray's decoding failed: that is what the user meets
                out.append(Verdict(rid, "fails", f"decoding as xarray does: {_said(exc, url)}"))
                continue
        out.append(Verdict(rid, "differs" if diffs else "equal",
                           "; ".join(diffs[:MAX_SAID]) + (f" (and {len(diffs) - MAX_SAID} more)"
                                                          if len(diffs) > MAX_SAID else "")))
    return out


def can_open(url: str, ids: list[str]) -> list[Verdict]:
    """``nczarr-check --readers``: does each reader open the store and read its arrays (no source to compare)."""
    out: list[Verdict] = []
    for reading in _readings(url, ids):
        if isinstance(reading, Verdict):
            out.append(reading)
            continue
        rid, _, seen = reading
        out.append(Verdict(rid, "opens", f"{sum(len(g.variables) for _, g in seen.root.walk())} arrays read"))
    return out


def _said(exc: BaseException, url: str) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300].replace(str(Path(url).resolve()), "<store>")
