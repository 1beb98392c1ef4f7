"""The Peer protocol every implementation adapter follows, and the registry of peers.

A peer writes a model into a store directory and/or reads a store into a model.
``available()`` returns None when the tool is there, else the reason it is not (naming the
missing tool: the report's summary lists it). ``capabilities`` (peers/capabilities.py) is what
the peer says it can do: the matrix picks the cases and the spec rules for it by those names,
never by its id; ``model`` and ``attributes`` (what a comparison looks at) follow from them.

Peers come from three places, each recorded in ``source`` so that a clash names both sides:
this package (one module per implementation, registered by peers/implementations.py), an entry point
of group ``nczarr_conformance.peers`` (peers/plugins.py), or a command (peers/command.py:
``--reader``/``--writer``, a TOML file).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nczarr_conformance.errors import DuplicateIdError
from nczarr_conformance.model import Dataset
from nczarr_conformance.peers.capabilities import ALL


class CannotExpress(Exception):
    """The peer has no way to write this case (a skip, not a failure)."""


class PeerFailed(Exception):
    """The peer ran and failed; ``detail`` holds what it said (its stderr), for the cell's detail."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


class Peer(ABC):
    id: str = ""
    name: str = ""
    reads: bool = False
    writes: bool = False
    root_only: bool = False  # True: the peer returns the root group only, so only the root is compared
    capabilities: frozenset[str] = ALL
    #: where the peer came from (set by register when empty): a module, an entry point, a command line
    source: str = ""
    #: the layout its writer writes, by flavor name (flavor_names.WRITE_FLAVORS), when it says: a known fault's
    #: evidence may name its reference writer by flavor (conformance/evidence.py) instead of by id
    flavor: str | None = None
    #: its pinned faults, as data (conformance/known.py says the keys and checks them): the cells where ours does
    #: worse because of this implementation, each with the evidence re-checked on every run
    known: tuple[Mapping[str, Any], ...] = ()
    #: where ``known`` was declared, for errors (default: ``source``): a file, a config table, a module
    known_source: str = ""

    @property
    def model(self) -> str:
        """``"netcdf"`` (the whole netCDF-4 model) or ``"zarr"`` (arrays and untyped attributes only):
        what a comparison involving this peer looks at."""
        return "netcdf" if "nczarr" in self.capabilities else "zarr"

    @property
    def attributes(self) -> bool:
        """False: the peer writes or returns arrays only, so attributes are not compared."""
        return "attributes" in self.capabilities

    def available(self) -> str | None:
        return None

    def version(self) -> str:
        return ""

    def write(self, dataset: Dataset, target: Path, options: dict[str, str]) -> str:
        """Write into ``target`` (a path that does not exist yet); return the store's path."""
        raise NotImplementedError

    @abstractmethod
    def read(self, url: str) -> Dataset: ...

    def close(self) -> None:
        """End what the peer keeps for a run (a command peer's ``serve`` workers); none by default."""
        return None

    def read_detailed(self, url: str) -> tuple[Dataset, str]:
        """The model read and what the peer said on the way (a command's stderr): the cell's detail."""
        return self.read(url), ""


PEERS: dict[str, Peer] = {}


def register(peer: Peer, source: str | None = None) -> Peer:
    """Add ``peer`` to the registry the matrix runs; an id already there is refused in one line
    naming where each of the two came from."""
    peer.source = source or peer.source or type(peer).__module__
    if peer.id in PEERS:
        raise DuplicateIdError(f"peer id {peer.id!r} registered twice: first by {PEERS[peer.id].source}, "
                               f"again by {peer.source}")
    PEERS[peer.id] = peer
    return peer


@contextmanager
def registered(peers: Iterable[Peer]) -> Iterator[list[Peer]]:
    """Register ``peers`` for the length of a run, then remove them again (a run's command adapters
    and plugins do not outlive it: a later run in this process may declare them anew)."""
    added: list[Peer] = []
    try:
        for peer in peers:
            added.append(register(peer))
        yield added
    finally:
        for peer in added:
            if PEERS.get(peer.id) is peer:
                del PEERS[peer.id]


def reject_options(options: dict[str, str], peer: str) -> None:
    if options:
        raise CannotExpress(f"{peer} cannot write {', '.join(f'{k}={v}' for k, v in sorted(options.items()))}")
