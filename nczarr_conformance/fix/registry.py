"""Fix, Change and the fix registry (one function per fix id, like the check rules).

A fix is ``@fix("NCZ-FIX-AREA-WHAT", readers=(...), cures=(...))`` on a function taking a
:class:`~nczarr_conformance.fix.context.FixContext` and yielding one :class:`Change` per
object it edits. ``readers`` are the readers the fix is for (it runs when ``--for`` names
one of them); ``cures`` are the nczarr-check rule ids whose findings it removes, so
nczarr-check can name it. The first line of its docstring is the documented description.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nczarr_conformance.fix.context import FixContext

#: Readers a fix can be for (``nczarr-fix --for``); netcdf-c 4.10 must read every fixed store right.
READERS = ("zarr-python", "xarray", "tensorstore", "gdal", "netcdf-c-4.9")


@dataclass(frozen=True, slots=True)
class Change:
    """One edit a fix makes (or plans) to one object: what it was, what it becomes."""

    fix: str
    key: str
    message: str


FixFunction = Callable[["FixContext"], Iterator[Change]]


@dataclass(frozen=True, slots=True)
class Fix:
    id: str
    function: FixFunction
    readers: tuple[str, ...]
    cures: tuple[str, ...]
    rewrites_chunks: bool = False
    always: bool = False  # runs whatever --for says (a stale .zmetadata misleads every reader that uses it)

    @property
    def description(self) -> str:
        return (self.function.__doc__ or "").strip().splitlines()[0]

    def change(self, key: str, message: str) -> Change:
        return Change(self.id, key, message)


FIXES: dict[str, Fix] = {}


def fix(fix_id: str, *, readers: tuple[str, ...], cures: tuple[str, ...] = (),
        rewrites_chunks: bool = False, always: bool = False) -> Callable[[FixFunction], FixFunction]:
    """Register a fix function under a stable id; a duplicate id is a programming error."""

    def register(function: FixFunction) -> FixFunction:
        if fix_id in FIXES:
            raise ValueError(f"fix id {fix_id} registered twice")
        if not fix_id.startswith("NCZ-FIX-"):
            raise ValueError(f"fix id {fix_id} must start with NCZ-FIX-")
        if not (function.__doc__ or "").strip():
            raise ValueError(f"fix {fix_id} needs a docstring: its first line is the documentation")
        unknown = [r for r in readers if r not in READERS]
        if not readers or unknown:
            raise ValueError(f"fix {fix_id}: readers must be some of {', '.join(READERS)}")
        FIXES[fix_id] = Fix(fix_id, function, readers, cures, rewrites_chunks, always)
        return function

    return register


def for_rule(rule_id: str) -> str | None:
    """The id of the fix that cures findings of ``rule_id``, or None."""
    for f in FIXES.values():
        if rule_id in f.cures:
            return f.id
    return None


def get(fix_id: str) -> Fix:
    try:
        return FIXES[fix_id]
    except KeyError:
        raise KeyError(f"unknown fix {fix_id}; known: {', '.join(sorted(FIXES))}") from None
