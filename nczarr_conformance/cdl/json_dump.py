"""``nczarr-dump --json``: the canonical model as JSON, streamed one piece of values at a time.

The header (dimensions, attributes, storage) is small and rendered by ``json.dumps``; each
variable's data are written a piece (up to 64 Ki values) at a time from the dump source's
slabs, so memory is bounded by one slab whatever the declared shape. Floats and integers are
formatted in bulk (cdl/bulk.py: a float is the ``repr`` of the float nearest its shortest
decimal, as ``values_to_json`` makes it; an integer its ``%d``) and packed with their
separators and brackets by cdl/vardata.py's ``pack``; doubles go through ``json.dumps`` of
the piece's list, strings and chars through ``values_to_json``. The output parses to exactly
``Dataset.to_json()``; tests/test_cdl_bulk.py holds each piece's text to ``json.dumps`` of
``values_to_json``.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from nczarr_conformance import keys
from nczarr_conformance.cdl.bulk import Items, Specials, format_d, format_shortest32
from nczarr_conformance.cdl.vardata import pack
from nczarr_conformance.model import Variable, values_to_json
from nczarr_conformance.sources.dump_source import DumpSource

#: values formatted at once (rows of the first dimension are never split)
PIECE_VALUES = 1 << 16
_MARK = re.compile(r'"\\u0000data(\d+)\\u0000"')
_INTEGERS = ("byte", "ubyte", "short", "ushort", "int", "uint", "int64", "uint64")


def write_json(source: DumpSource, write: Callable[[str], None], *, data: bool, storage: bool) -> None:
    doc = source.dataset.to_json(data=False, storage=storage)
    marked: list[tuple[str, Variable]] = []
    if data:
        for gpath, group in source.dataset.root.walk():
            gdoc = doc["root"]
            for name in keys.split(gpath):
                gdoc = gdoc["groups"][name]
            for name, var in group.variables.items():
                vdoc = gdoc["variables"][name]
                items = list(vdoc.items())
                at = [k for k, _ in items].index("attributes") + 1  # where to_json puts "data"
                items.insert(at, ("data", f"\x00data{len(marked)}\x00"))
                vdoc.clear()
                vdoc.update(items)
                marked.append((keys.join(gpath, name), var))
    text = json.dumps(doc, ensure_ascii=False, indent=1)
    start = 0
    for match in _MARK.finditer(text):
        write(text[start:match.start()])
        path, var = marked[int(match.group(1))]
        _write_values(source, path, var, write)
        start = match.end()
    write(text[start:] + "\n")


def _write_values(source: DumpSource, path: str, var: Variable, write: Callable[[str], None]) -> None:
    if not var.shape:
        for value in source.slabs(path, var):
            write(json.dumps(values_to_json(value, var.type), ensure_ascii=False))
        return
    write("[")
    first = True
    with np.errstate(all="ignore"):
        for slab in source.slabs(path, var):
            step = max(1, PIECE_VALUES // max(1, math.prod(slab.shape[1:])))
            for i in range(0, slab.shape[0], step):
                text = piece_text(slab[i:i + step], var.type)
                if text:
                    write(("" if first else ", ") + text)
                    first = False
    write("]")


def piece_text(piece: np.ndarray, nctype: str) -> str:
    """The JSON of rows along the first dimension, joined by ``", "`` (no outer brackets)."""
    if piece.shape[0] == 0:
        return ""
    if piece.size and (nctype == "float" or nctype in _INTEGERS):
        return _bulk_text(piece, nctype)
    if nctype == "double":
        return json.dumps(_double_lists(piece))[1:-1]
    return json.dumps(values_to_json(piece, nctype), ensure_ascii=False)[1:-1]


def _double_lists(piece: np.ndarray) -> Any:
    """``values_to_json`` of doubles without its text round trip: numpy's ``str`` of a double is its
    shortest repr, so ``float(str(x)) == x``; NaN and the infinities as their JSON strings."""
    flat = piece.astype(np.float64).reshape(-1)
    values: list[Any] = flat.tolist()
    for i in np.flatnonzero(~np.isfinite(flat)).tolist():
        x = values[i]
        values[i] = "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    if piece.ndim == 1:
        return values
    nested = np.empty(len(values), dtype=object)
    nested[:] = values
    return nested.reshape(piece.shape).tolist()


def _shortest_python(value: float) -> str:
    """What ``values_to_json`` + ``json.dumps`` make of one float32 (the rare values left to Python)."""
    return repr(float(str(np.float32(value))))


def _bulk_text(piece: np.ndarray, nctype: str) -> str:
    """Bulk-formatted values packed with ``", "`` and, between rows of inner dimensions, ``], [``."""
    flat = piece.reshape(-1)
    items: Items
    if nctype == "float":
        zero = flat == 0
        items = format_shortest32(flat, Specials([
            (np.isnan(flat), '"NaN"'), (flat == np.inf, '"Infinity"'), (flat == -np.inf, '"-Infinity"'),
            (zero & ~np.signbit(flat), "0.0"), (zero & np.signbit(flat), "-0.0")], _shortest_python))
    else:
        items = format_d(flat, Specials([], str))
    inner = piece.shape[1:]
    ends = np.zeros(flat.size, dtype=np.int64)  # how many inner rows end at each value
    block = 1
    for size in reversed(inner):
        block *= size
        ends += (np.arange(1, flat.size + 1) % block) == 0
    ends[-1] = -1
    ends_of = {"]" * r + ", " + "[" * r: np.flatnonzero(ends == r) for r in range(1, len(inner) + 1)}
    ends_of["]" * len(inner) + ", "] = np.array([flat.size - 1])
    opening = "[" * len(inner)
    text = pack(items, {k: v for k, v in ends_of.items() if v.size}, np.zeros(0, dtype=np.int64), "", {})
    return opening + text[:-2].decode("ascii")


__all__ = ["PIECE_VALUES", "piece_text", "write_json"]
