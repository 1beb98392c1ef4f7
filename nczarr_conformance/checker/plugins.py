"""Check rules from other distributions: entry points of group ``nczarr_conformance.rules``.

An entry point names a module, whose import registers its ``@rule`` functions (checker/rules.py), or
a callable, called once with no argument, that registers them. What each registers is recorded as
coming from that entry point, so a rule id that clashes with ours, or with another plugin's, is
refused in one line naming both (``rule id X registered twice: first by module …, again by entry
point …``). Loading is idempotent: an entry point already loaded in this process is not loaded again.

``pending`` and ``load`` are shared with peers/plugins.py (group
``nczarr_conformance.peers``).
"""
from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any

from nczarr_conformance.checker import rules
from nczarr_conformance.errors import DuplicateIdError, UsageError

GROUP = "nczarr_conformance.rules"
_LOADED: set[tuple[str, str, str]] = set()
_SCANNED = False  # the rules group was read in this process


def entry_point_source(ep: EntryPoint) -> str:
    """How a report and an error name an entry point: its name, its target and its distribution."""
    dist = getattr(ep, "dist", None)
    owner = f" (distribution {dist.name} {dist.version})" if dist is not None else ""
    return f"entry point {ep.name} = {ep.value} of group {ep.group}{owner}"


def pending(group: str, *, once: bool = True) -> list[tuple[EntryPoint, str]]:
    """The entry points of ``group`` in name order, each with its source. ``once``: only those not
    loaded yet in this process, which count as loaded from now on (registering is a side effect that
    must not repeat; a failure is then reported once, not on every later call)."""
    todo = []
    for ep in sorted(entry_points(group=group), key=lambda e: (e.name, e.value)):
        key = (group, ep.name, ep.value)
        if once and key in _LOADED:
            continue
        _LOADED.add(key)
        todo.append((ep, entry_point_source(ep)))
    return todo


def load(ep: EntryPoint, source: str) -> Any:
    """The entry point's target; one that cannot be imported is a usage error naming the entry point."""
    try:
        return ep.load()
    except (DuplicateIdError, UsageError):
        raise
    except Exception as exc:  # an ImportError, or whatever the plugin's import raised
        raise UsageError(f"{source}: cannot load: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def _register_rules(target: Any, source: str) -> None:
    if isinstance(target, ModuleType):
        return  # importing it registered its rules
    if not callable(target):
        raise UsageError(f"{source}: a module or a callable is expected, not {type(target).__name__}")
    try:
        target()
    except (DuplicateIdError, UsageError):
        raise
    except Exception as exc:  # whatever the plugin raised: one line, exit 2
        raise UsageError(f"{source}: registering its rules failed: {_one_line(exc)}") from None


def load_rule_plugins() -> list[str]:
    """Load every ``nczarr_conformance.rules`` entry point, the first time it is called in a process (see the
    module's docstring); returns their sources. A rule registered while one loads is recorded as coming from
    it."""
    global _SCANNED
    if _SCANNED:  # reading every distribution's metadata costs ~50 ms: once per process, not once per check()
        return []
    _SCANNED = True
    done = []
    for ep, source in pending(GROUP):
        rules.LOADING.append(source)
        try:
            _register_rules(load(ep, source), source)
        finally:
            rules.LOADING.pop()
        done.append(source)
    return done
