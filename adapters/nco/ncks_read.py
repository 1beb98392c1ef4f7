#!/usr/bin/env python3
"""NCO's ncks as a conformance reader: ``ncks --xml URL`` (NcML, which keeps every attribute's netCDF type,
where ncks' JSON drops it) turned into the canonical model JSON (docs/contracts/model.md) on stdout.

Standalone on purpose (the standard library only, nothing of nczarr_conformance): what is graded is what
ncks and its netcdf-c read, not our code. Usage: ``ncks_read.py URL`` (a netcdf-c URL, ``…#mode=nczarr,file``).
Exit 1 with ncks' last stderr line when ncks fails (a crash is a finding, reported as such).
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.unidata.ucar.edu/namespaces/netcdf/ncml-2.2}"
#: NcML type (+ isUnsigned) → netCDF type name
TYPES = {("byte", False): "byte", ("byte", True): "ubyte", ("short", False): "short", ("short", True): "ushort",
         ("int", False): "int", ("int", True): "uint", ("long", False): "int64", ("long", True): "uint64",
         ("float", False): "float", ("double", False): "double", ("char", False): "char",
         ("String", False): "string", ("string", False): "string"}


def nctype(el: ET.Element) -> str:
    return TYPES[(el.get("type", "char"), el.get("isUnsigned") == "true")]


def number(text: str, kind: str) -> object:
    if kind in ("float", "double"):
        value = float(text)
        if math.isnan(value):
            return "NaN"
        return "Infinity" if value == math.inf else "-Infinity" if value == -math.inf else value
    return int(text)


def attribute(el: ET.Element) -> dict[str, object]:
    kind = nctype(el)
    raw = el.get("value", "")
    if kind == "char":
        return {"type": "char", "value": raw}
    sep = el.get("separator")
    items = raw.split(sep) if sep else raw.split()
    if kind == "string":
        return {"type": "string", "value": items}
    return {"type": kind, "value": [number(v, kind) for v in items]}


def reshape(flat: list[object], shape: list[int]) -> object:
    if not shape:
        return flat[0] if flat else None
    step = len(flat) // shape[0] if shape[0] else 0
    return [reshape(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def group(el: ET.Element, path: str, scope: dict[str, tuple[str, int]]) -> dict[str, object]:
    """One group; ``scope`` maps a visible dimension name to its (full name, size): inner names hide outer."""
    scope = dict(scope)
    dims: dict[str, object] = {}
    for d in el.findall(f"{NS}dimension"):
        name, size = d.get("name", ""), int(d.get("length", "0"))
        dims[name] = {"size": size, "unlimited": d.get("isUnlimited") == "true"}
        scope[name] = (f"{path}/{name}", size)
    variables: dict[str, object] = {}
    for v in el.findall(f"{NS}variable"):
        kind = nctype(v)
        attrs = {a.get("name", ""): a for a in v.findall(f"{NS}attribute")}
        # NcML marks an unsigned variable with an _Unsigned attribute ncks adds; netCDF-4 has the type itself
        if attrs.get("_Unsigned") is not None and attrs["_Unsigned"].get("value") == "true":
            del attrs["_Unsigned"]
            kind = TYPES[(v.get("type", "char"), True)]
        names = (v.get("shape") or "").split()
        full = [scope[n][0] for n in names]
        shape = [scope[n][1] for n in names]
        values = v.find(f"{NS}values")
        text = values.text or "" if values is not None else ""
        if kind == "char":
            flat: list[object] = list(text.ljust(math.prod(shape), "\0"))
        elif kind == "string":
            sep = values.get("separator") if values is not None else None
            flat = list(text.split(sep) if sep else text.split())
        else:
            flat = [number(t, kind) for t in text.split()]
        variables[v.get("name", "")] = {
            "type": kind, "dimensions": full, "shape": shape,
            "attributes": {name: attribute(a) for name, a in attrs.items()},
            "data": reshape(flat, shape)}
    return {"dimensions": dims,
            "attributes": {a.get("name", ""): attribute(a) for a in el.findall(f"{NS}attribute")},
            "variables": variables,
            "groups": {g.get("name", ""): group(g, f"{path}/{g.get('name', '')}", scope)
                       for g in el.findall(f"{NS}group")}}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: ncks_read.py URL", file=sys.stderr)
        return 2
    done = subprocess.run(["ncks", "--xml", argv[1]], capture_output=True, check=False)
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        why = f"killed by signal {-done.returncode}" if done.returncode < 0 else f"exit {done.returncode}"
        print(f"ncks {why}: {lines[-1] if lines else 'no message'}", file=sys.stderr)
        return 1
    root = ET.fromstring(done.stdout)
    json.dump({"model": "nczarr-model/1", "root": group(root, "", {})}, sys.stdout, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
