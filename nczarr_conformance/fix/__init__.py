"""nczarr-fix: rewrite a store's metadata into the form every chosen reader reads right.

``fix_store(url, …)`` plans the edits (:mod:`.plan`: the fixes of :mod:`.fixes` run over
the metadata in memory), checks that no reader at hand reads the edited store worse
(:mod:`.verify`) and carries them out (:mod:`.apply`), in place or into a copy. In place, it
plans from the snapshot it writes and commits all edits at once; a refusal, a failure or an
interrupt changes nothing (see :mod:`.apply` for what S3 can and cannot promise).

May import ``nczarr``, ``sources`` (the check that netcdf-c still reads a fixed store),
``stores`` and the ground floor.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nczarr_conformance import safety
from nczarr_conformance.errors import NczarrError, NoDatasetError, StoreError, UsageError
from nczarr_conformance.fix import fixes  # noqa: F401  (registers the fixes)
from nczarr_conformance.fix.apply import (
    PartlyWritten,
    open_session,
    refuse_unsafe_output,
    remove_backup,
    remove_dead_leftovers,
    write_backup,
    write_copy,
)
from nczarr_conformance.fix.plan import (
    Plan,
    iter_changes,
    make_plan,
    parse_targets,
    render_diff,
)
from nczarr_conformance.fix.registry import FIXES, READERS, Change, Fix, for_rule
from nczarr_conformance.fix.to_v3 import TO_V3, plan_to_v3
from nczarr_conformance.fix.verify import check_migration, check_readers
from nczarr_conformance.stores import open_store
from nczarr_conformance.stores.base import Store
from nczarr_conformance.stores.sniff import explain_open_failure, netcdf_file_error
from nczarr_conformance.urls import StoreSpec, parse

__all__ = ["FIXES", "READERS", "Change", "Fix", "FixResult", "Plan", "fix_store", "for_rule", "make_plan"]


@dataclass
class FixResult:
    plan: Plan
    text: str  # what the CLI prints
    backup: str | None = None


def _text(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def fix_store(url: str, *, out: str | None = None, dry_run: bool = False, targets: str | None = None,
              backup: bool = True, to_v3: str | None = None) -> FixResult:
    """Fix the store at ``url`` in place, or into ``out``; ``dry_run`` only plans (see the CLI).
    ``to_v3`` (a v3 flavor: ``zarr``): migrate it to Zarr v3 instead (:mod:`.to_v3`), through the fixes'
    plan, reader check and apply path.

    In place, the store's writer lock is held from before the plan reads the store until the
    edits are in: no other writer changes the store between the plan and the edits, and a
    fix meeting another writer is refused at once (``stores.lock_for_writing``).
    """
    from nczarr_conformance.stores import lock_for_writing

    way = _Way.migration(to_v3, url) if to_v3 is not None else _Way.fixes(parse_targets(targets), url,
                                                                           named=targets is not None)
    if out is not None or dry_run:
        return _fix_store(url, way, out=out, dry_run=dry_run, backup=backup)
    with lock_for_writing(url):
        return _fix_store(url, way, out=out, dry_run=dry_run, backup=backup)


@dataclass(frozen=True)
class _Way:
    """How a run plans (``plan(store, can_rewrite_chunks)``) and checks the readers (``check``): the fixes,
    or ``--to-v3``'s migration; the rest of the path (backup, apply, commit) is one."""

    plan: Callable[[Store, bool], Plan]
    check: Callable[..., None]

    @staticmethod
    def fixes(chosen: frozenset[str], url: str, *, named: bool = False) -> _Way:
        """``named``: the user chose the readers with ``--for``; what one of them still could not read after the
        fixes refuses the run (UsageError naming the flag that would serve it), in every mode, before a write."""
        def plan(store: Store, can: bool) -> Plan:
            try:
                made = make_plan(store, chosen, can_rewrite_chunks=can, named=named)
            except NoDatasetError as exc:  # named with the store's path, and what its server says
                raise explain_open_failure(store, url, exc) from exc
            if made.unmet:
                more = f" (and {len(made.unmet) - 1} more)" if len(made.unmet) > 1 else ""
                raise UsageError(f"{url}: refused: {made.unmet[0]}{more}; nothing was changed")
            return made

        return _Way(plan, check_readers)

    @staticmethod
    def migration(flavor: str, url: str) -> _Way:
        def plan(store: Store, _can: bool) -> Plan:
            try:
                return plan_to_v3(store, flavor)
            except NczarrError as exc:  # the store's path first: the message names only the array
                raise _unchanged(type(exc)(f"{url}: {exc}")) from exc

        return _Way(plan, check_migration)


def _fix_store(url: str, way: _Way, *, out: str | None, dry_run: bool, backup: bool) -> FixResult:
    spec = parse(url)
    not_a_store = netcdf_file_error(spec, url)
    if not_a_store is not None:
        raise not_a_store
    out_spec = parse(out) if out else None
    if out_spec is not None:
        refuse_unsafe_output(spec, out_spec)
    if dry_run or out_spec is not None:
        with open_store(spec) as source:
            plan = way.plan(source, not (out_spec is None and spec.kind == "s3"))
            if out_spec is None:
                text = render_diff(plan) + _text([f"loss: {node}: {loss}" for node, loss in plan.losses.items()]
                                                 + [f"note: {n}" for n in plan.notes])
                return FixResult(plan, text or f"{plan.nothing}\n")
            lines = list(iter_changes(plan))
            way.check(source, plan, url)
            write_copy(source, out_spec, plan)
        if plan.empty:
            lines.append(plan.nothing)
        lines.append(f"fixed copy written: {out}")
        if not plan.empty:
            lines.append(_summary(plan))
        return FixResult(plan, _text(lines))
    remove_dead_leftovers(spec)  # a killed run's aside tree, temporary zip or unfinished backup
    if spec.kind == "file":  # a snapshot costs a link per object: first look whether there is anything to do
        with open_store(spec) as view:
            first = way.plan(view, True)
        if first.empty:
            return FixResult(first, _text([*iter_changes(first), first.nothing]))
    return _fix_in_place(spec, way, backup)


def _summary(plan: Plan) -> str:
    if any(TO_V3 in e.fixes for e in plan.edits):
        made = sum(1 for e in plan.edits if e.new is not None)
        return (f"migrated to Zarr v3: {made} zarr.json written, {len(plan.edits) - made} v2 metadata object(s) "
                "removed, no chunk rewritten")
    return f"{len(plan.edits)} metadata object(s) rewritten, {len(plan.chunk_keys())} chunk(s) re-encoded"


def _fix_in_place(spec: StoreSpec, way: _Way, backup: bool) -> FixResult:
    """Plan from the snapshot the session writes, check the readers, back up, stage, commit; on any
    failure or interrupt nothing is changed (the backup this run wrote is removed again)."""
    with open_session(spec) as session:
        plan = way.plan(session.store, spec.kind != "s3")
        lines = list(iter_changes(plan))
        if plan.empty:
            return FixResult(plan, _text([*lines, plan.nothing]))
        saved = None
        try:
            way.check(session.store, plan, session.where, beside=local_path(spec))
            if backup:
                saved = write_backup(spec, session.store, plan)
            session.apply(plan)
            session.commit()
        except PartlyWritten as exc:
            held = f"; the backup {saved} holds the old objects" if saved else ""
            raise StoreError(f"{exc}{held}: run nczarr-fix again to finish") from exc
        except BaseException as exc:
            if saved is not None:
                with safety.critical():
                    remove_backup(saved, spec)
            if isinstance(exc, NczarrError):
                raise _unchanged(exc) from exc
            if isinstance(exc, OSError):
                raise StoreError(f"{session.where}: {exc.strerror or exc}; nothing was changed") from exc
            raise
    if saved is not None:
        lines.append(f"backup: {saved}")
    lines.append(_summary(plan))
    return FixResult(plan, _text(lines), saved)


def local_path(spec: StoreSpec) -> Path | None:
    """A directory or zip store's resolved path (where its temporaries go), None on S3."""
    return None if spec.kind == "s3" else Path(os.path.realpath(spec.path))


def _unchanged(exc: NczarrError) -> NczarrError:
    """``exc`` saying that the store was left as it was."""
    if "nothing was changed" in str(exc):
        return exc
    try:
        return type(exc)(f"{exc}; nothing was changed")
    except TypeError:  # an error class with another signature
        return StoreError(f"{exc}; nothing was changed")
