"""How a lazily opened group shows itself: ``repr`` as indented text, ``_repr_html_`` for notebooks.

Both list what netCDF4-python's ``print(ds)`` lists (dimensions, variables with their type, dimensions and
chunks, attributes, sub-groups), from the metadata already in memory: showing a dataset reads no chunk.
"""
from __future__ import annotations

import html
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from nczarr_conformance import keys
from nczarr_conformance.model import Group


class ShownGroup(Protocol):
    """What showing needs of a group: ``access/lazy.py``'s ``LazyGroup`` is one. A protocol rather than an
    import of that class, so this module stays below the one that calls it."""

    @property
    def model(self) -> Group: ...

    @property
    def attrs(self) -> Mapping[str, Any]: ...

    @property
    def groups(self) -> Mapping[str, ShownGroup]: ...

#: an attribute's value longer than this is cut (a repr is for reading, not for copying values out)
VALUE_WIDTH = 60


def short_value(value: Any) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= VALUE_WIDTH else text[:VALUE_WIDTH - 1] + "…"


def _dimensions(group: ShownGroup) -> str:
    return ", ".join(f"{name}={dim.size}" + (" (unlimited)" if dim.unlimited else "")
                     for name, dim in group.model.dimensions.items()) or "(none)"


def _variable_line(name: str, group: ShownGroup) -> str:
    var = group.model.variables[name]
    dims = ", ".join(keys.basename(d) for d in var.dimensions)
    chunks = f"  chunks {tuple(var.chunks)}" if var.chunks is not None else ""
    return f"{var.type} {name}({dims}){chunks}"


def text_lines(group: ShownGroup, indent: str = "") -> Iterator[str]:
    """The group's contents, one line each, sub-groups indented under ``group NAME:``."""
    yield f"{indent}dimensions: {_dimensions(group)}"
    if group.model.variables:
        yield f"{indent}variables:"
        for name in group.model.variables:
            yield f"{indent}    {_variable_line(name, group)}"
    attrs = group.attrs
    if attrs:
        yield f"{indent}attributes:"
        for name, value in attrs.items():
            yield f"{indent}    {name} = {short_value(value)}"
    for name, sub in group.groups.items():
        yield f"{indent}group {name}:"
        yield from text_lines(sub, indent + "    ")


def html_section(group: ShownGroup) -> str:
    """The group as nested ``<details>``: self-contained, no script, every name and value escaped."""
    e = html.escape
    rows = [f"<li>dimensions: {e(_dimensions(group))}</li>"]
    if group.model.variables:
        items = "".join(f"<li><code>{e(_variable_line(name, group))}</code></li>" for name in group.model.variables)
        rows.append(f"<li>variables:<ul>{items}</ul></li>")
    attrs = group.attrs
    if attrs:
        items = "".join(f"<li><code>{e(name)}</code> = {e(short_value(value))}</li>" for name, value in attrs.items())
        rows.append(f"<li>attributes:<ul>{items}</ul></li>")
    for name, sub in group.groups.items():
        rows.append(f"<li><details><summary>group <code>{e(name)}</code></summary>{html_section(sub)}</details></li>")
    return f"<ul>{''.join(rows)}</ul>"
