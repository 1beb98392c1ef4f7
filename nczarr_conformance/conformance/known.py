"""Known peer faults as data, each declared by the implementation it concerns.

An implementation's pinned faults sit beside its declaration: a built-in peer's in its own module under
``peers/`` (its class's ``known``), an implementation declared in ``nczarr-conformance.toml`` in a file beside
its adapter (``known = "adapters/mytool/known.toml"``) or inline (``known = [{…}]``), a plugin's on the Peer it
returns. Each entry, as a TOML table::

    [[known]]
    writer = ["ours", "ours-nczarr-2"]   # side "writer": which of our writers' output the fault is seen on
    cases = ["char-var"]                 # case ids (conformance/cases.py)
    why = "mytool 1.2 reverses the bytes of a >S1 array; it reads netcdf-c 4.10's output identically"
    evidence = { kind = "same_as_writer", writer = "netcdf-c-4.10" }   # conformance/evidence.py

``side`` is ``"writer"`` (the default: the declaring implementation reads our ``writer``'s output worse than
another writer's) or ``"reader"`` (our reader reads the declaring implementation's store worse than another
reader does; ``reader`` defaults to ``"ours"``). An implementation declares its own faults only: the entry's
reader (side writer) or writer (side reader) is the declaring implementation, by default and by rule.

Every entry is checked when it is loaded: an unknown key, an unknown case id, an unknown evidence kind or
parameter, and an entry (side, case, writer, reader) declared twice are each one line naming where the entry is
declared and which entry it is.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nczarr_conformance.conformance.cases import BY_ID
from nczarr_conformance.conformance.evidence import Evidence, make_evidence
from nczarr_conformance.errors import UsageError
from nczarr_conformance.peers.base import Peer

OUR_READER = "ours"
ENTRY_KEYS = frozenset({"side", "writer", "reader", "cases", "why", "evidence"})


@dataclass(frozen=True)
class Known:
    """A violation that is a peer's fault: why, and a check of the evidence on the run itself."""
    side: str
    case: str
    writer: str
    reader: str
    why: str
    evidence: Evidence
    #: where the entry is declared, for errors: a file or a module, and the entry's number there
    where: str = ""

    @property
    def key(self) -> tuple[str, str, str, str]:
        return self.side, self.case, self.writer, self.reader


def _names(value: Any, what: str) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(i, str) for i in items):
        raise ValueError(f"{what} must be an id or a non-empty list of ids")
    return list(items)


def _entry(raw: Any, owner: str) -> list[Known]:
    if not isinstance(raw, Mapping):
        raise ValueError("must be a table")
    unknown = sorted(set(raw) - ENTRY_KEYS)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r}; known: {', '.join(sorted(ENTRY_KEYS))}")
    side = raw.get("side", "writer")
    if side not in ("writer", "reader"):
        raise ValueError(f"side must be \"writer\" or \"reader\", not {side!r}")
    for key in ("cases", "why", "evidence"):
        if key not in raw:
            raise ValueError(f"no {key}")
    if side == "writer":
        if "writer" not in raw:
            raise ValueError("no writer (which of our writers' output the fault is seen on)")
        writers, readers = _names(raw["writer"], "writer"), _names(raw.get("reader", owner), "reader")
        theirs = readers
    else:
        writers, readers = _names(raw.get("writer", owner), "writer"), _names(raw.get("reader", OUR_READER), "reader")
        theirs = writers
    if theirs != [owner]:
        raise ValueError(f"{owner} declares its own faults only: a {side}-side entry's "
                         f"{'reader' if side == 'writer' else 'writer'} is {owner}, not {', '.join(theirs)}")
    cases = _names(raw["cases"], "cases")
    strange = [c for c in cases if c not in BY_ID]
    if strange:
        raise ValueError(f"unknown case id {strange[0]!r}")
    if not isinstance(raw["why"], str) or not raw["why"].strip():
        raise ValueError("why must be a non-empty string")
    if not isinstance(raw["evidence"], Mapping):
        raise ValueError("evidence must be a table: { kind = \"…\", … }")
    evidence = make_evidence(dict(raw["evidence"]))
    return [Known(side, case, writer, reader, raw["why"], evidence)
            for writer in writers for reader in readers for case in cases]


def parse_known(entries: Iterable[Any], owner: str, where: str) -> list[Known]:
    """The known faults ``owner`` declares (``entries``: its data), each checked; a bad entry is a UsageError
    naming ``where`` and the entry's number (from 1)."""
    found: list[Known] = []
    for number, raw in enumerate(entries, 1):
        label = f"{where}: known entry {number}"
        try:
            made = _entry(raw, owner)
        except ValueError as exc:
            raise UsageError(f"{label}: {exc}") from None
        found.extend(Known(k.side, k.case, k.writer, k.reader, k.why, k.evidence, label) for k in made)
    return found


def known_of(peers: Iterable[Peer]) -> list[Known]:
    """Every known fault the ``peers`` declare, checked; one (side, case, writer, reader) declared twice is
    refused naming both places."""
    found: list[Known] = []
    first: dict[tuple[str, str, str, str], Known] = {}
    for peer in peers:
        for k in parse_known(peer.known, peer.id, peer.known_source or peer.source or peer.id):
            if k.key in first:
                raise UsageError(f"{k.where}: {k.side}-side {k.case}: {k.writer} → {k.reader} declared twice: "
                                 f"first by {first[k.key].where}")
            first[k.key] = k
            found.append(k)
    return found


__all__ = ["ENTRY_KEYS", "Known", "known_of", "parse_known"]
