"""CDL text as ``ncdump`` 4.9.0 prints it, with its selections (-h -c -v -g -s -t -p).

Why this mirrors ncdump line for line (ncdump.c ``do_ncdump_rec``, vardata.c
``vardata``/``print_rows``): people diff our dump against ncdump's, and ``ncgen``
must read it back. Data come from a ``slabs`` callback one slab at a time
(a few chunks along the first dimension), so a dump holds at most one slab of
one variable, never the dataset. The small text rules live in cdl/text.py.
"""
from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from nczarr_conformance.cdl.header_text import (
    attribute_line,
    dimension_line,
    dimension_name,
    group_attributes_heading,
    parent_path,
    variable_line,
)
from nczarr_conformance.cdl.text import (
    ValueFormatter,
    byte_len,
    escape_name,
    to_bytes,
)
from nczarr_conformance.cdl.time import TimeInfo, iso_time, time_info
from nczarr_conformance.errors import UsageError
from nczarr_conformance.model import Attribute, Dataset, Group, Variable
from nczarr_conformance.nczarr.dtypes import DEFAULT_FILL
from nczarr_conformance.sources.dump_source import StorageFacts

if TYPE_CHECKING:  # the data section's modules are imported by the first variable printed: -h needs none
    from nczarr_conformance.cdl.annotate import Annotations
    from nczarr_conformance.cdl.vardata import Items, MakeItems

#: A variable's values in C order, as arrays along the first dimension (one 0-d array for a scalar).
Slabs = Callable[[str, Variable], Iterator[np.ndarray]]
#: HDF5 filter ids netcdf-c shows in ``_Filter`` for codecs it knows (shuffle/zlib/fletcher32 have own attributes).
HDF5_FILTER_IDS = {"bz2": 307, "zstd": 32015}


@dataclass
class CdlOptions:
    """ncdump's command-line choices; the defaults print everything as plain ``ncdump`` does."""

    header_only: bool = False
    variables: tuple[str, ...] = ()  # -v: data of these only
    groups: tuple[str, ...] = ()  # -g: data of these groups only
    coordinates: bool = False  # -c: data of coordinate variables only
    specials: bool = False  # -s
    times: bool = False  # -t / -i
    iso_separator: str = " "
    float_digits: int | None = None  # -p; None is ncdump's 7 (and a C_format attribute applies)
    double_digits: int | None = None  # None is ncdump's 15
    line_length: int = 80  # -l
    filter_atts: bool = False  # -F: with -s, every filter in one _Filter (HDF5 ids), as ncdump -F
    annotations: Annotations | None = None  # -b / -f: a comment naming each row / each value


def _element_size(nctype: str) -> int:
    """The bytes of one value, shuffle's parameter in ``_Filter`` (a string is a pointer to HDF5: 8)."""
    from nczarr_conformance.nctypes import NUMERIC

    return int(NUMERIC[nctype][1:]) if nctype in NUMERIC else 8 if nctype == "string" else 1


def _child(path: str, name: str) -> str:
    return path.rstrip("/") + "/" + name


def codecs_json(value: Any) -> str:
    """netcdf-c 4.10's ``NCJunparse``: ``{"k": v, "k2": v2}``, lists without spaces."""
    import json

    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {codecs_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(codecs_json(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _escaped_json(text: str) -> str:
    """utils.c ``escaped_string``: quotes escaped, ASCII controls as ``\\%xx``."""
    return "".join(f"\\%{ord(c):02x}" if ord(c) < 0x20 or ord(c) == 0x7F else ('\\"' if c == '"' else c)
                   for c in text)


class CdlWriter:
    """Writes one dataset as CDL through ``write``; see ``CdlOptions`` for what is selected."""

    def __init__(self, dataset: Dataset, write: Callable[[str], object], options: CdlOptions | None = None,
                 slabs: Slabs | None = None, facts: StorageFacts | None = None) -> None:
        self.dataset = dataset
        self.write = write
        self.opt = options or CdlOptions()
        self.slabs = slabs
        self.facts = facts or StorageFacts()
        self.groups = dict(dataset.root.walk())
        self.max_len = self.opt.line_length - 2
        self.att_linep = 0
        self.bounds: dict[str, Variable] = {}
        self.has_values: Callable[[Variable], bool] = lambda var: True
        self.wanted = self._wanted_groups()
        self._check_variables()

    # ---- selections --------------------------------------------------------------------
    def _wanted_groups(self) -> set[str] | None:
        """utils.c ``grp_matches``: '/'-rooted names are paths, others match groups of that name anywhere."""
        if not self.opt.groups:
            return None
        wanted: set[str] = set()
        for spec in self.opt.groups:
            if spec in ("", "/"):
                found = ["/"]
            elif spec.startswith("/"):
                found = [p for p in self.groups if p == spec.rstrip("/")]
            else:
                found = [p for p in self.groups if p != "/" and p.rsplit("/", 1)[1] == spec]
            if not found:
                raise UsageError(f"-g {spec}: no such group")
            wanted.update(found)
        return wanted

    @staticmethod
    def _matches(spec: str, gpath: str, vname: str) -> bool:
        """utils.c ``nc_inq_gvarid``: ``x`` in any group, ``g/x`` in groups ending in g, ``/g/x`` exactly."""
        if "/" not in spec:
            return spec == vname
        vargroup, rel = spec.rsplit("/", 1)
        if rel != vname:
            return False
        if spec.startswith("/"):
            return gpath == (vargroup or "/")  # ncdump rejects "/x" for a root variable; we accept it
        return gpath.endswith(vargroup)

    def _check_variables(self) -> None:
        for spec in self.opt.variables:
            if not any(self._matches(spec, g, v) for g, grp in self.groups.items() for v in grp.variables):
                raise UsageError(f"-v {spec}: no such variable")

    def _is_coordinate(self, gpath: str, vname: str, var: Variable) -> bool:
        """dumplib.c ``iscoordvar``: 1-d and named like a dimension visible from its group."""
        if len(var.shape) != 1:
            return False
        path = gpath
        while True:
            if vname in self.groups[path].dimensions:
                return True
            if path == "/":
                return False
            path = parent_path(path)

    def prints_data(self, gpath: str, vname: str, var: Variable) -> bool:
        """Whether this variable's data section is printed (so its chunks are read)."""
        if self.opt.header_only or (self.wanted is not None and gpath not in self.wanted):
            return False
        if self.opt.variables and not any(self._matches(s, gpath, vname) for s in self.opt.variables):
            return False
        if self.opt.coordinates and not self._is_coordinate(gpath, vname, var):
            return False
        return all(n > 0 for n in var.shape) and self.has_values(var)

    # ---- header ------------------------------------------------------------------------
    def dump(self, name: str) -> None:
        self.write(f"netcdf {escape_name(name)} {{\n")
        self._group("/", self.dataset.root, 0)
        self.write("}\n")

    def _dim_name(self, gpath: str, ref: str) -> str:
        """The dimension as ncdump names it: relative unless an ancestor's same name hides it."""
        return dimension_name(gpath, ref, lambda path, name: name in self.groups[path].dimensions)

    def _group(self, gpath: str, group: Group, indent: int) -> None:
        ind = " " * indent
        w = self.write
        if group.dimensions:
            w(f"{ind}dimensions:\n")
            for name, dim in group.dimensions.items():
                w(dimension_line(ind, name, dim.size, dim.unlimited))
        if group.variables:
            w(f"{ind}variables:\n")
        for vname, var in group.variables.items():
            w(variable_line(ind, var.type, vname, [self._dim_name(gpath, ref) for ref in var.dimensions]))
            for aname, attr in var.attributes.items():
                self._attribute(ind, vname, aname, attr, var)
            if self.opt.specials:
                self._specials(ind, _child(gpath, vname), vname, var)
        if group.attributes or self.opt.specials:
            w(group_attributes_heading(ind, gpath == "/"))
        for aname, attr in group.attributes.items():
            self._attribute(ind, "", aname, attr, None)
        if gpath == "/" and self.opt.specials:
            for aname, text in self.facts.hidden:
                w(f"{ind}\t\t:{aname} = {text} ;\n")
            w(f'{ind}\t\t:_Format = "{self.facts.kind}" ;\n')
        if not self.opt.header_only and (self.wanted is None or gpath in self.wanted):
            if group.variables:
                w(f"{ind}data:\n")
            for vname, var in group.variables.items():
                if self.prints_data(gpath, vname, var):
                    self._data(indent, _child(gpath, vname), vname, var)
        for gname, sub in group.groups.items():
            w(f"\n{ind}group: {escape_name(gname)} {{\n")
            self._group(_child(gpath, gname), sub, indent + 2)
            w(f"{ind}  }} // group {escape_name(gname)}\n")

    def _digits(self) -> tuple[int, int]:
        return self.opt.float_digits or 7, self.opt.double_digits or 15

    def _attribute(self, ind: str, vname: str, aname: str, attr: Attribute, var: Variable | None) -> None:
        """ncdump.c ``pr_att`` (with ``print_att_times`` under -t)."""
        fd, dd = self._digits()
        line = attribute_line(ind, vname, aname, attr.type, attr.value, fd, dd)
        if self.opt.times and var is not None:
            info = time_info(var)
            if info is not None and attr.type not in ("char", "string"):
                line += self._attribute_times(ind, attr.value.tolist(), info)
            if aname == "bounds" and attr.type in ("char", "string"):
                target = attr.value if attr.type == "char" else str(attr.value[0])
                self.bounds[target] = var
        self.write(line + "\n")

    def _time_text(self, value: float, info: TimeInfo) -> str:
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return ("-" if value < 0 else "") + "Infinity"
        return f'"{iso_time(value, info, self.opt.iso_separator)}"'

    def _attribute_times(self, ind: str, values: list[Any], info: TimeInfo) -> str:
        """ncdump's ``print_att_times``/``lput2``: the values as dates in a CDL comment."""
        out = []
        wrap = len(values) > 2
        for i, value in enumerate(values):
            text = self._time_text(float(value), info) + ("," if i < len(values) - 1 else "")
            self.att_linep += 1 + byte_len(text)
            newline = wrap and (i == 0 or self.att_linep > self.max_len + 2)
            if newline:
                out.append(f"\n{ind}\t\t  ")
                self.att_linep = 16 + 2 + byte_len(text)
            else:
                out.append(" ")
            if i == 0 or newline:
                out.append("// ")
                self.att_linep += 3
            out.append(text)
        return "".join(out)

    def _specials(self, ind: str, vpath: str, vname: str, var: Variable) -> None:
        """ncdump.c ``pr_att_specials`` as netcdf-c 4.10 prints it (``_Codecs`` for NCZarr)."""
        pre = f"{ind}\t\t{escape_name(vname)}:"
        w = self.write
        if self.facts.nczarr or var.chunks is not None:
            w(f'{pre}_Storage = "chunked" ;\n')
            if var.chunks:
                w(f"{pre}_ChunkSizes = {', '.join(str(c) for c in var.chunks)} ;\n")
        else:
            w(f'{pre}_Storage = "contiguous" ;\n')
        codecs = list(var.filters or [])
        ids = [c.get("id") for c in codecs]
        if self.opt.filter_atts:
            self._filter_attribute(pre, var, codecs)
        elif "fletcher32" in ids:
            w(f'{pre}_Fletcher32 = "true" ;\n')
        if not self.opt.filter_atts:
            self._legacy_filter_attributes(pre, codecs)
        if self.facts.nczarr and codecs:
            w(f'{pre}_Codecs = "{_escaped_json(codecs_json(codecs))}" ;\n')
        if var.type not in ("char", "byte", "ubyte", "string") and var.endianness in ("little", "big"):
            w(f'{pre}_Endianness = "{var.endianness}" ;\n')
        if vpath in self.facts.no_fill:
            w(f'{pre}_NoFill = "true" ;\n')

    def _legacy_filter_attributes(self, pre: str, codecs: list[dict[str, Any]]) -> None:
        """ncdump without -F: _Shuffle and _DeflateLevel by name, the other filters in one _Filter."""
        w = self.write
        if "shuffle" in (c.get("id") for c in codecs):
            w(f'{pre}_Shuffle = "true" ;\n')
        for codec in codecs:
            if codec.get("id") == "zlib":
                w(f"{pre}_DeflateLevel = {int(codec.get('level', 0))} ;\n")
        others = [f"{HDF5_FILTER_IDS[c['id']]},{int(c.get('level', 0))}" for c in codecs
                  if c.get("id") in HDF5_FILTER_IDS]
        if others:
            w(f'{pre}_Filter = "{"|".join(others)}" ;\n')

    def _filter_attribute(self, pre: str, var: Variable, codecs: list[dict[str, Any]]) -> None:
        """ncdump -F: every filter as ``id[,params]`` in HDF5's pipeline order (fletcher32, shuffle with the
        element size, then deflate and the rest as defined), ``|`` between them."""
        ids = [c.get("id") for c in codecs]
        parts = ["3"] if "fletcher32" in ids else []
        if "shuffle" in ids:
            parts.append(f"2,{_element_size(var.type)}")
        for codec in codecs:
            if codec.get("id") == "zlib":
                parts.append(f"1,{int(codec.get('level', 0))}")
            elif codec.get("id") in HDF5_FILTER_IDS:
                parts.append(f"{HDF5_FILTER_IDS[codec['id']]},{int(codec.get('level', 0))}")
        if parts:
            self.write(f'{pre}_Filter = "{"|".join(parts)}" ;\n')

    # ---- data --------------------------------------------------------------------------
    def _formatter(self, var: Variable) -> ValueFormatter:
        """dumplib.c ``get_fmt`` and ncdump.c ``get_fill_info``."""
        fd, dd = self._digits()
        fmt = None
        specified = self.opt.float_digits if var.type == "float" else (
            self.opt.double_digits if var.type == "double" else None)
        cfmt = var.attributes.get("C_format")
        if specified is None and cfmt is not None and cfmt.type == "char" and 0 < len(cfmt.value) < 100:
            fmt = cfmt.value
        fill_attr = var.attributes.get("_FillValue")
        fill: Any
        if fill_attr is not None and fill_attr.type == var.type and fill_attr.type != "char" \
                and len(fill_attr.value) == 1:
            fill = fill_attr.value[0]
        elif var.type in ("byte", "ubyte", "char"):
            fill = None  # ncdump: "don't do default fill-values for bytes, too risky"
        else:
            fill = DEFAULT_FILL[var.type]
            if var.type in ("float", "double"):
                fill = np.dtype("f4" if var.type == "float" else "f8").type(fill)
        return ValueFormatter(var.type, fill, fmt, fd, dd)

    def _data(self, indent: int, vpath: str, vname: str, var: Variable) -> None:
        """vardata.c ``vardata``: the name, then the rows (cdl/vardata.py formats and wraps them in bulk)."""
        from nczarr_conformance.cdl.annotate import AnnotatedData
        from nczarr_conformance.cdl.vardata import DataSection

        assert self.slabs is not None
        rank = len(var.shape)
        self.write("\n" + " " * indent + " " + escape_name(vname))
        if rank <= 1:
            self.write(" = ")
            pos = byte_len(vname) + 4 + indent  # ncdump counts the unescaped name
        else:
            self.write(" =\n  ")
            pos = 2 + indent
        fmt = self._formatter(var)
        info = None
        if self.opt.times and var.type not in ("char", "string"):
            owner = self.bounds.get(vname)
            info = time_info(owner if owner is not None else var)
        items: MakeItems = fmt.items
        if info is not None:
            items = partial(self._time_items, fmt=fmt, info=info)
        unlimited = [self.dataset.find_dimension(ref).unlimited for ref in var.dimensions]
        section = DataSection(self.write, var.shape, unlimited, indent, self.max_len, items, fmt.all_fill)
        with np.errstate(all="ignore"):
            slabs = self.slabs(vpath, var)
            if self.opt.annotations is not None:
                annotated = AnnotatedData(section, escape_name(vname), self.opt.annotations, pos)
                annotated.rows(slabs, chars=var.type == "char")
            elif var.type == "char":
                section.chars(slabs)
            elif rank <= 1:
                section.one_row(slabs, pos)
            else:
                section.rows(slabs)

    def _time_items(self, values: np.ndarray, *, fmt: ValueFormatter, info: TimeInfo) -> Items:
        """dumplib.c ``nctime_val_tostring`` (the fill value still prints as ``_``)."""
        from nczarr_conformance.cdl.vardata import Items

        flat = np.asarray(values).reshape(-1)
        mask = fmt.fill_mask(flat).tolist()
        texts = ["_" if m else self._time_text(float(v), info) for v, m in zip(flat.tolist(), mask, strict=True)]
        return Items.of_texts(texts, ascii_only=False)


def model_slabs(path: str, var: Variable) -> Iterator[np.ndarray]:
    """Slabs of a model that already holds its data."""
    if var.data is not None:
        yield np.asarray(var.data)


def to_cdl(dataset: Dataset, name: str, *, data: bool = True, options: CdlOptions | None = None) -> str:
    """The whole CDL text of an in-memory model.

    Without ``options`` numbers print with 9/17 significant digits, so ``ncgen``
    rebuilds exactly the same values (ncdump's default 7/15 would round them).
    """
    opt = replace(options or CdlOptions(float_digits=9, double_digits=17))
    opt.header_only = opt.header_only or not data
    buf = io.StringIO()
    writer = CdlWriter(dataset, buf.write, opt, model_slabs)
    writer.has_values = lambda var: var.data is not None
    writer.dump(name)
    return buf.getvalue()


__all__ = ["CdlOptions", "CdlWriter", "Slabs", "StorageFacts", "codecs_json", "model_slabs", "to_bytes", "to_cdl"]
