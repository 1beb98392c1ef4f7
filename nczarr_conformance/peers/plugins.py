"""Peers from other distributions: entry points of group ``nczarr_conformance.peers``.

An entry point names a callable (a function, or a Peer subclass) returning one Peer or an iterable of
them, or a Peer object itself; each peer records the entry point as its ``source``, so an id that
clashes with a built-in peer, a command adapter or another plugin is refused in one line naming both
(peers/base.py ``register``). A pyproject.toml declares one as::

    [project.entry-points."nczarr_conformance.peers"]
    mytool = "mytool_conformance:peers"
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nczarr_conformance.checker.plugins import load, pending
from nczarr_conformance.errors import UsageError
from nczarr_conformance.peers.base import Peer

GROUP = "nczarr_conformance.peers"


def _peers_of(target: Any, source: str) -> list[Peer]:
    made = target
    if not isinstance(target, Peer):
        if not callable(target):
            raise UsageError(f"{source}: a callable returning peers is expected, not {type(target).__name__}")
        try:
            made = target()
        except UsageError:
            raise
        except Exception as exc:  # whatever the plugin raised: one line, exit 2
            raise UsageError(f"{source}: making its peers failed: {' '.join(f'{type(exc).__name__}: {exc}'.split())}"
                             ) from None
    items = [made] if isinstance(made, Peer) else list(made) if isinstance(made, Iterable) else [made]
    for item in items:
        if not isinstance(item, Peer):
            raise UsageError(f"{source}: returned a {type(item).__name__}, not a nczarr_conformance Peer")
        item.source = source
    return items


def load_peer_plugins() -> list[Peer]:
    """The peers of every ``nczarr_conformance.peers`` entry point, made anew on each call and not
    registered: the caller registers them for its run (peers/base.py ``registered``)."""
    found: list[Peer] = []
    for ep, source in pending(GROUP, once=False):
        found.extend(_peers_of(load(ep, source), source))
    return found
