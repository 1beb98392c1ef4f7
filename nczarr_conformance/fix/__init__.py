"""nczarr-fix: rewrite a store's metadata into the form every chosen reader reads right.

``fix_store(url, …)`` plans the edits (:mod:`.plan`: the fixes of :mod:`.fixes` run over
the metadata in memory) and carries them out (:mod:`.apply`), in place or into a copy.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..sniff import netcdf_file_error
from ..stores import open_store
from ..urls import parse
from . import fixes  # noqa: F401  (registers the fixes)
from .apply import fix_in_place, refuse_unsafe_output, write_backup, write_copy
from .plan import Plan, iter_changes, make_plan, parse_targets, render_diff
from .registry import FIXES, READERS, Change, Fix, for_rule

__all__ = ["fix_store", "FixResult", "FIXES", "READERS", "Change", "Fix", "Plan", "for_rule", "make_plan"]


@dataclass
class FixResult:
    plan: Plan
    text: str  # what the CLI prints
    backup: str | None = None


def fix_store(url: str, *, out: str | None = None, dry_run: bool = False, targets: str | None = None,
              backup: bool = True) -> FixResult:
    """Fix the store at ``url`` in place, or into ``out``; ``dry_run`` only plans (see the CLI).

    In place, the store's writer lock is held from before the plan reads the store until the
    edits are in: no other writer changes the store between the plan and the edits, and a
    fix meeting another writer is refused at once (``stores.lock_for_writing``).
    """
    from ..stores import lock_for_writing

    if out is not None or dry_run:
        return _fix_store(url, out=out, dry_run=dry_run, targets=targets, backup=backup)
    with lock_for_writing(url):
        return _fix_store(url, out=out, dry_run=dry_run, targets=targets, backup=backup)


def _fix_store(url: str, *, out: str | None, dry_run: bool, targets: str | None, backup: bool) -> FixResult:
    chosen = parse_targets(targets)
    spec = parse(url)
    not_a_store = netcdf_file_error(spec, url)
    if not_a_store is not None:
        raise not_a_store
    out_spec = parse(out) if out else None
    if out_spec is not None:
        refuse_unsafe_output(spec, out_spec)
    with open_store(spec) as source:
        in_place_s3 = out_spec is None and spec.kind == "s3"
        plan = make_plan(source, chosen, can_rewrite_chunks=not in_place_s3)
        lines = list(iter_changes(plan))
        if dry_run:
            text = render_diff(plan) + "".join(f"{line}\n" for line in plan_notes(plan))
            return FixResult(plan, text or "nothing to fix\n")
        saved = None
        if out_spec is not None:
            write_copy(source, out_spec, plan)
            lines.append(f"fixed copy written: {out}")
        elif plan.empty:
            lines.append("nothing to fix")
        else:
            if backup:
                saved = write_backup(spec, source, plan)
                lines.append(f"backup: {saved}")
            fix_in_place(spec, source, plan)
        if not plan.empty:
            lines.append(f"{len(plan.edits)} metadata object(s) rewritten, {len(plan.chunk_keys())} chunk(s) re-encoded")
        return FixResult(plan, "".join(f"{line}\n" for line in lines), saved)


def plan_notes(plan: Plan) -> list[str]:
    return [f"note: {n}" for n in plan.notes]
