"""The Peer protocol every implementation adapter follows, and the registry of peers.

A peer writes a model into a store directory and/or reads a store into a model.
``available()`` returns None when the tool is there, else the reason it is not;
``model`` is what the peer can express: ``"netcdf"`` (the whole netCDF-4 model)
or ``"zarr"`` (arrays and untyped attributes only), which decides what a
comparison looks at.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

from nczarr_conformance.model import Dataset


class CannotExpress(Exception):
    """The peer has no way to write this case (a skip, not a failure)."""


class Peer(ABC):
    id: str = ""
    name: str = ""
    reads: bool = False
    writes: bool = False
    model: str = "netcdf"
    root_only: bool = False
    attributes: bool = True  # False: the peer returns arrays only, so attributes are not compared

    def available(self) -> str | None:
        return None

    def version(self) -> str:
        return ""

    def write(self, dataset: Dataset, target: Path, options: dict[str, str]) -> str:
        """Write into ``target`` (a path that does not exist yet); return the store's path."""
        raise NotImplementedError

    @abstractmethod
    def read(self, url: str) -> Dataset: ...


PEERS: dict[str, Peer] = {}


def register(peer: Peer) -> Peer:
    if peer.id in PEERS:
        raise ValueError(f"peer id {peer.id} registered twice")
    PEERS[peer.id] = peer
    return peer


def reject_options(options: dict[str, str], peer: str) -> None:
    if options:
        raise CannotExpress(f"{peer} cannot write {', '.join(f'{k}={v}' for k, v in sorted(options.items()))}")
