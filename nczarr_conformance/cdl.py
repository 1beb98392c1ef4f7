"""CDL text (as ``ncdump`` prints it) from a canonical model.

The text is meant to be read by people and by ``ncgen``: attribute values
carry ncgen's type suffixes, fill values print as ``_``, char data as strings.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from .model import Attribute, Dataset, Group, Variable
from .nczarr.dtypes import DEFAULT_FILL

SUFFIX = {"byte": "b", "ubyte": "UB", "short": "s", "ushort": "US", "int": "", "uint": "U",
          "int64": "LL", "uint64": "ULL", "float": "f", "double": ""}
ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\x00": "\\000"}


def quote(text: str) -> str:
    out = []
    for ch in text:
        if ch in ESCAPES:
            out.append(ESCAPES[ch])
        elif ord(ch) < 32:
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def format_number(value: Any, nctype: str, *, suffix: bool) -> str:
    if nctype in ("float", "double"):
        x = float(value)
        if math.isnan(x):
            text = "NaN"
        elif math.isinf(x):
            text = "Infinity" if x > 0 else "-Infinity"
        else:
            text = str(np.float32(x)) if nctype == "float" else repr(x)
        return text + (SUFFIX[nctype] if suffix else "")
    return str(int(value)) + (SUFFIX[nctype] if suffix else "")


def format_attribute(attr: Attribute) -> str:
    if attr.type == "char":
        return quote(attr.value)
    if attr.type == "string":
        return ", ".join(quote(str(v)) for v in attr.value.tolist())
    return ", ".join(format_number(v, attr.type, suffix=True) for v in attr.value.tolist())


def _is_fill(value: Any, var: Variable) -> bool:
    fill = var.fill_value
    if fill is None:
        fill = DEFAULT_FILL[var.type]
    if var.type in ("float", "double"):
        a = float(value)
        b = float(fill)
        return (math.isnan(a) and math.isnan(b)) or a == b
    if var.type in ("char", "string"):
        return False
    return int(value) == int(fill)


def _data_lines(name: str, var: Variable, indent: str) -> Iterator[str]:
    data = np.asarray(var.data)
    if var.type == "char":
        if data.size == 0:
            texts = ['""']
        else:
            rows2d = data.reshape(-1, data.shape[-1]) if data.ndim else data.reshape(1, 1)
            texts = [quote(b"".join(r.tolist()).decode("latin-1")) for r in rows2d]
        yield f"{indent} {name} = " + f",\n{indent}  ".join(texts) + " ;"
        return
    flat = data.ravel().tolist()
    if var.type == "string":
        items = [quote(str(v)) for v in flat]
    else:
        items = ["_" if _is_fill(v, var) else format_number(v, var.type, suffix=False) for v in flat]
    width = data.shape[-1] if data.ndim else 1
    rows = [", ".join(items[i:i + width]) for i in range(0, len(items), max(1, width))] or [""]
    if len(rows) == 1:
        yield f"{indent} {name} = {rows[0]} ;"
    else:
        yield f"{indent} {name} ="
        yield f"{indent}  " + f",\n{indent}  ".join(rows) + " ;"


def _group_lines(group: Group, indent: str, data: bool) -> Iterator[str]:
    if group.dimensions:
        yield f"{indent}dimensions:"
        for name, dim in group.dimensions.items():
            if dim.unlimited:
                yield f"{indent}\t{name} = UNLIMITED ; // ({dim.size} currently)"
            else:
                yield f"{indent}\t{name} = {dim.size} ;"
    if group.variables:
        yield f"{indent}variables:"
        for name, var in group.variables.items():
            dims = ", ".join(d.rsplit("/", 1)[-1] for d in var.dimensions)
            yield f"{indent}\t{var.type} {name}" + (f"({dims})" if dims else "") + " ;"
            for aname, attr in var.attributes.items():
                prefix = "string " if attr.type == "string" else ""
                yield f"{indent}\t\t{prefix}{name}:{aname} = {format_attribute(attr)} ;"
    if group.attributes:
        yield ""
        yield f"{indent}// {'global' if not indent else 'group'} attributes:"
        for aname, attr in group.attributes.items():
            prefix = "string " if attr.type == "string" else ""
            yield f"{indent}\t\t{prefix}:{aname} = {format_attribute(attr)} ;"
    written = [(n, v) for n, v in group.variables.items() if v.data is not None]
    if data and written:
        yield f"{indent}data:"
        for name, var in written:
            yield ""
            yield from _data_lines(name, var, indent)
    for name, sub in group.groups.items():
        yield ""
        yield f"{indent}group: {name} {{"
        yield from _group_lines(sub, indent + "  ", data)
        yield f"{indent}  }} // group {name}"


def to_cdl(dataset: Dataset, name: str, *, data: bool = True) -> str:
    lines = [f"netcdf {name} {{", *_group_lines(dataset.root, "", data), "}"]
    return "\n".join(lines) + "\n"
