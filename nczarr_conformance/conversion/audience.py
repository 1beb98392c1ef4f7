"""The readers a conversion writes for: the source's traits, the plan for ``--for``, and the one line that says
who reads the result.

reader_needs.py holds what each reader needs; this module applies it to a source about to be converted: it
reads the traits that matter off the (transformed) model, chooses the layout with :func:`reader_needs.plan`,
rewrites the model's codecs where the plan drops filters or compression, and words the result. The choice is
made before anything is written, so a conflict (netcdf-c wants >S1 char, zarr-python refuses it) is said first.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nczarr_conformance import keys, reader_needs
from nczarr_conformance.model import Attribute, Dataset, Variable
from nczarr_conformance.nczarr.dtypes import DEFAULT_FILL
from nczarr_conformance.reader_needs import Layout, Loss, Plan, Source

#: the netCDF number types (xarray masks their fill_value: integers become float64, a fill value NaN)
NUMBERS = frozenset({"byte", "ubyte", "short", "ushort", "int", "uint", "int64", "uint64", "float", "double"})
#: codec ids that compress (the rest of a variable's codec list are filters: shuffle, fletcher32, delta, …)
COMPRESSORS = frozenset({"zlib", "gzip", "bz2", "lzma", "zstd", "blosc", "lz4"})


#: the Source traits :func:`source_places` can point at, one object each (a variable, or an attribute)
PLACED_TRAITS = ("char", "strings", "scalars", "groups", "chunks_over_shape", "unlimited", "big_endian",
                 "unfilled_numbers", "unfilled_chars", "nan_attributes", "unused_dimensions", "subgroup_dimensions",
                 "typed_fill_values", "float32_attributes", "nc_named_group_attributes",
                 "nc_named_variable_attributes")


def source_places(dataset: Dataset) -> dict[str, list[str]]:
    """Each boolean trait of :class:`Source` → the objects that give the source that trait (``/g/v``, ``/g/v
    attribute scale_factor``, ``/g dimension time``), in the model's order: a reader's loss is named where it
    happens, not only as a kind of loss."""
    places: dict[str, list[str]] = {trait: [] for trait in PLACED_TRAITS}
    used: set[str] = set()
    defined: dict[str, str] = {}
    for gkey, group in dataset.root.walk():
        if gkey != "/":
            places["groups"].append(gkey)
        for dname, dim in group.dimensions.items():
            defined[keys.join(gkey, dname)] = f"{gkey} dimension {dname}"
            if dim.unlimited:
                places["unlimited"].append(f"{gkey} dimension {dname}")
            if gkey != "/":
                places["subgroup_dimensions"].append(f"{gkey} dimension {dname}")
        _attribute_places(places, gkey, group.attributes, packed=False)
        places["nc_named_group_attributes"] += [f"{gkey} attribute {n}" for n in group.attributes if _nc_named(n)]
        for name, var in group.variables.items():
            vkey = keys.join(gkey, name)
            for trait, fires in (
                    ("char", var.type == "char"), ("strings", var.type == "string"), ("scalars", var.is_scalar),
                    ("big_endian", var.endianness == "big" and var.type not in ("byte", "ubyte", "char", "string")),
                    ("unfilled_numbers", var.type in NUMBERS and takes_default_fill(var)),
                    ("unfilled_chars", var.type == "char" and takes_default_fill(var)),
                    ("chunks_over_shape", bool(var.chunks) and any(
                        c > s > 0 for c, s in zip(var.chunks or (), var.shape, strict=False)))):
                if fires:
                    places[trait].append(vkey)
            _attribute_places(places, vkey, {n: a for n, a in var.attributes.items() if n != "_FillValue"},
                              packed=True)
            places["nc_named_variable_attributes"] += [f"{vkey} attribute {n}" for n in var.attributes if _nc_named(n)]
            used.update(var.dimensions)
            fill = var.attributes.get("_FillValue")
            if fill is not None and fill.type not in reader_needs.JSON_TYPES:
                places["typed_fill_values"].append(f"{vkey} attribute _FillValue")
    places["unused_dimensions"] = [where for key, where in defined.items() if key not in used]
    return places


def _nc_named(name: str) -> bool:
    """A name xarray's zarr engine hides (it drops NCZarr's ``_nczarr_*`` keys by the prefix ``_nc``, any case)."""
    return name.lower().startswith("_nc")


def _attribute_places(places: dict[str, list[str]], owner: str, attributes: Mapping[str, Attribute], *,
                      packed: bool) -> None:
    """The attribute traits of one group's or variable's attributes; ``packed``: a variable's, whose float32
    scale_factor/add_offset decides the type it decodes to."""
    for name, attr in attributes.items():
        if _not_finite(attr):
            places["nan_attributes"].append(f"{owner} attribute {name}")
        if attr.type == "float" and ((packed and name in ("scale_factor", "add_offset")) or _inexact_in_json(attr)):
            places["float32_attributes"].append(f"{owner} attribute {name}")


def source_traits(dataset: Dataset, places: Mapping[str, list[str]] | None = None) -> Source:
    """What the layout's traits depend on, as the (already transformed) model holds it."""
    places = places if places is not None else source_places(dataset)
    filters: set[str] = set()
    compressors: set[str] = set()
    types: set[str] = set()
    names: set[str] = set()
    for _, group in dataset.root.walk():
        types.update(a.type for a in group.attributes.values())
        for var in group.variables.values():
            types.update(a.type for n, a in var.attributes.items() if n != "_FillValue")
            names.update(n for n in var.attributes if n != "_FillValue")
            for codec in var.filters or []:
                cid = str(codec.get("id"))
                (compressors if cid in COMPRESSORS else filters).add(cid)
    return Source(filters=frozenset(filters), compressors=frozenset(compressors), attribute_types=frozenset(types),
                  variable_attributes=frozenset(names), **{trait: bool(places[trait]) for trait in PLACED_TRAITS})


def culprits(loss: Loss, layout: Layout, places: Mapping[str, list[str]]) -> list[str]:
    """The objects behind ``loss`` in ``layout``: those of each source trait without which its need would not
    fire (found by asking the need again with that trait off); [] where the layout alone decides it (a zip,
    a filter)."""
    found: list[str] = []
    for trait in PLACED_TRAITS:
        without: dict[str, Any] = {trait: False}
        if getattr(layout.source, trait) and not loss.need.when(
                dataclasses.replace(layout, source=dataclasses.replace(layout.source, **without))):
            found += places[trait]
    return found


def _not_finite(attr: Attribute) -> bool:
    """A float attribute holding NaN or an infinity."""
    if attr.type not in ("float", "double"):
        return False
    return not bool(np.all(np.isfinite(np.asarray(attr.value, dtype="f8"))))


def _inexact_in_json(attr: Attribute) -> bool:
    """A float32 attribute whose JSON number (float32's shortest text) reads back as another 64-bit value."""
    values = np.asarray(attr.value, dtype="f4").ravel()
    return any(bool(np.isfinite(v)) and float(str(v)) != float(v) for v in values)


def takes_default_fill(var: Variable) -> bool:
    """No _FillValue and no fill of its own (HDF5's fill left at netCDF's default): the writer gives it netCDF's
    default fill as fill_value, which xarray masks."""
    return (var.fill_value is None and not var.no_fill
            and (var.storage_fill is None or var.storage_fill == DEFAULT_FILL.get(var.type)))


def container_of(kind: str) -> str:
    """The table's container for a store kind of urls.parse ("file", "zip", "s3", …)."""
    return "zip" if kind == "zip" else "directory" if kind == "file" else kind


def strip_codecs(dataset: Dataset, choice: Mapping[str, object]) -> frozenset[str]:
    """Drop the filters (``filters: none``) or every codec (``compression: none``) the plan gives up, and cap chunks
    at the shape (``chunks: capped``); return the keys of the variables changed (their chunks are re-encoded,
    never copied as they are)."""
    changed: set[str] = set()
    drop_all = choice.get("compression") == "none"
    drop_filters = choice.get("filters") == "none"
    capped = choice.get("chunks") == "capped"
    for gkey, group in dataset.root.walk():
        for name, var in group.variables.items():
            if drop_all or drop_filters:
                kept = [] if drop_all else [c for c in var.filters or [] if str(c.get("id")) in COMPRESSORS]
                if kept != list(var.filters or []):
                    var.filters = kept
                    changed.add(keys.join(gkey, name))
            if capped and var.chunks and any(c > s > 0 for c, s in zip(var.chunks, var.shape, strict=False)):
                var.chunks = [min(c, s) if s > 0 else c for c, s in zip(var.chunks, var.shape, strict=False)]
                changed.add(keys.join(gkey, name))
    return frozenset(changed)


@dataclass
class Audience:
    """Who reads the store a conversion writes: the plan for the named readers, or the default's readers."""

    layout: Layout
    named: list[str] = field(default_factory=list)
    plan: Plan | None = None
    #: the source's objects behind each trait (:func:`source_places`): where each loss happens
    places: Mapping[str, list[str]] = field(default_factory=dict)

    def readable_line(self) -> str:
        """``readable by: …; not by: … (why)`` over the named readers, or every reader of the table."""
        ok, lost = reader_needs.readable_by(self.layout, self.named or None)
        parts = [f"readable by: {', '.join(ok) or 'none of them'}"]
        if lost:
            parts.append("not by: " + "; ".join(f"{rid} ({_short(_worst(needs).loses)})"
                                                for rid, needs in lost.items()))
        return "; ".join(parts)

    def plan_lines(self) -> list[str]:
        """What ``--for`` chose and, where the named readers conflict, which reader loses what."""
        if self.plan is None:
            return []
        changed = self.plan.changed()
        lines = [f"for {', '.join(self.named)}: " + (", ".join(f"{_knob(k, v)}" for k, v in changed.items())
                                                      or "the default layout")]
        for loss in self.plan.losses:
            lines.append(f"{loss.reader} loses: {loss.need.loses}{_cure_hint(loss)}{self.where(loss)}")
        return lines

    def where(self, loss: Loss, most: int = 8) -> str:
        """``: in /a, /b attribute scale_factor, … and N more`` (the objects behind ``loss``), or ""."""
        objects = culprits(loss, self.layout, self.places)
        if not objects:
            return ""
        more = f" and {len(objects) - most} more" if len(objects) > most else ""
        return f": in {', '.join(objects[:most])}{more}"


def _worst(needs: list[reader_needs.Need]) -> reader_needs.Need:
    """The need to name for a reader: the first that loses the whole store, else the first."""
    return next((n for n in needs if n.fatal), needs[0])


def _short(text: str) -> str:
    """A need's words up to its first parenthesis: the loss and its cause, without the detail."""
    return text.split(" (")[0]


def _knob(name: str, value: object) -> str:
    return {"zarr_format": f"--zarr-format {value}", "flavor": f"--flavor {value}", "char_as": f"--char-as {value}",
            "filters": "no filters (shuffle dropped, compression kept)", "compression": "uncompressed",
            "zip_entries": "dataset at the top of the zip (zarr-python's ZipStore)",
            "chunks": "chunks capped at the arrays' lengths",
            "default_fill": "fill_value null for number and char variables without a _FillValue",
            }.get(name, f"{name}={value}")


def _cure_hint(loss: Loss) -> str:
    cure = loss.need.cure
    if cure is None:
        return " (no layout cures it)"
    if cure.get("container") == "directory":
        return " (write a directory instead)"
    return f" (--prefer {loss.reader} would write {', '.join(_knob(k, v) for k, v in cure.items())})"


def decide(dataset: Dataset, kind: str, readers: Iterable[str] | None, prefer: Iterable[str],
           fixed: Mapping[str, object]) -> tuple[Audience, dict[str, Any]]:
    """The audience of this conversion and the choices to write with (KNOBS names → values)."""
    places = source_places(dataset)
    source = source_traits(dataset, places)
    container = container_of(kind)
    named = list(readers or [])
    if named:
        chosen = reader_needs.plan(source, named, container=container, prefer=prefer, fixed=fixed)
        return Audience(chosen.layout, named, chosen, places), dict(chosen.choice)
    choice = {**{k: v for k, v in reader_needs.DEFAULT_CHOICE.items() if k != "char_as"}, **fixed}
    return Audience(reader_needs.layout_of(source, choice, container), places=places), choice
