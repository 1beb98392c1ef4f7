"""``nczarr-dump --json``: the canonical model as JSON, streamed one slab of values at a time.

The header (dimensions, attributes, storage) is small and rendered by ``json.dumps``; each
variable's data are written row by row from the dump source's slabs, so memory is bounded
by one piece of Python values whatever the declared shape. (Built whole, 10M floats as
Python objects cost 2.5 GB.) The output parses to exactly ``Dataset.to_json()``.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

from nczarr_conformance import keys
from nczarr_conformance.model import Variable, values_to_json
from nczarr_conformance.sources.dump_source import DumpSource

#: Values turned into Python objects at once: floats pass through a numpy text array of 128 bytes
#: each on the way (values_to_json), so 64 Ki values cost about 8 MB.
PIECE_VALUES = 1 << 16
_MARK = re.compile(r'"\\u0000data(\d+)\\u0000"')


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
    for slab in source.slabs(path, var):
        step = max(1, PIECE_VALUES // max(1, math.prod(slab.shape[1:])))
        for i in range(0, slab.shape[0], step):
            rows: list[Any] = values_to_json(slab[i:i + step], var.type)
            for row in rows:
                write(("" if first else ", ") + json.dumps(row, ensure_ascii=False))
                first = False
    write("]")
