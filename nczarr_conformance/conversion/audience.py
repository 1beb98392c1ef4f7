"""The readers a conversion writes for: the source's traits, the plan for ``--for``, and the one line that says
who reads the result.

reader_needs.py holds what each reader needs; this module applies it to a source about to be converted: it
reads the traits that matter off the (transformed) model, chooses the layout with :func:`reader_needs.plan`,
rewrites the model's codecs where the plan drops filters or compression, and words the result. The choice is
made before anything is written, so a conflict (netcdf-c wants >S1 char, zarr-python refuses it) is said first.
"""
from __future__ import annotations

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


def source_traits(dataset: Dataset) -> Source:
    """What the layout's traits depend on, as the (already transformed) model holds it."""
    char = strings = scalars = over = False
    filters: set[str] = set()
    compressors: set[str] = set()
    types: set[str] = set()
    names: set[str] = set()
    unlimited = big = unfilled = unfilled_chars = nan = typed_fill = float32_loss = False
    used: set[str] = set()
    defined: set[str] = set()
    subdims = False
    for gkey, group in dataset.root.walk():
        unlimited |= any(dim.unlimited for dim in group.dimensions.values())
        defined.update(keys.join(gkey, name) for name in group.dimensions)
        subdims |= gkey != "/" and bool(group.dimensions)
        types.update(a.type for a in group.attributes.values())
        nan |= any(_not_finite(a) for a in group.attributes.values())
        float32_loss |= any(a.type == "float" and _inexact_in_json(a) for a in group.attributes.values())
        for var in group.variables.values():
            char |= var.type == "char"
            strings |= var.type == "string"
            scalars |= var.is_scalar
            big |= var.endianness == "big" and var.type not in ("byte", "ubyte", "char", "string")
            unfilled |= var.type in NUMBERS and takes_default_fill(var)
            unfilled_chars |= var.type == "char" and takes_default_fill(var)
            over |= bool(var.chunks) and any(c > s > 0 for c, s in zip(var.chunks or (), var.shape, strict=False))
            types.update(a.type for n, a in var.attributes.items() if n != "_FillValue")
            names.update(n for n in var.attributes if n != "_FillValue")
            nan |= any(_not_finite(a) for n, a in var.attributes.items() if n != "_FillValue")
            float32_loss |= any(a.type == "float" and (n in ("scale_factor", "add_offset") or _inexact_in_json(a))
                                for n, a in var.attributes.items() if n != "_FillValue")
            used.update(var.dimensions)
            fill = var.attributes.get("_FillValue")
            typed_fill |= fill is not None and fill.type not in reader_needs.JSON_TYPES
            for codec in var.filters or []:
                cid = str(codec.get("id"))
                (compressors if cid in COMPRESSORS else filters).add(cid)
    return Source(char=char, strings=strings, scalars=scalars, groups=bool(dataset.root.groups),
                  filters=frozenset(filters), compressors=frozenset(compressors), attribute_types=frozenset(types),
                  variable_attributes=frozenset(names), chunks_over_shape=over, unlimited=unlimited,
                  big_endian=big, unfilled_numbers=unfilled, unfilled_chars=unfilled_chars, nan_attributes=nan,
                  unused_dimensions=bool(defined - used), subgroup_dimensions=subdims, typed_fill_values=typed_fill,
                  float32_attributes=float32_loss)


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
            lines.append(f"{loss.reader} loses: {loss.need.loses}{_cure_hint(loss)}")
        return lines


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
    source = source_traits(dataset)
    container = container_of(kind)
    named = list(readers or [])
    if named:
        chosen = reader_needs.plan(source, named, container=container, prefer=prefer, fixed=fixed)
        return Audience(chosen.layout, named, chosen), dict(chosen.choice)
    choice = {**{k: v for k, v in reader_needs.DEFAULT_CHOICE.items() if k != "char_as"}, **fixed}
    return Audience(reader_needs.layout_of(source, choice, container)), choice
