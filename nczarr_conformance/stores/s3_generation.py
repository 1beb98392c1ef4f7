"""Which dataset an S3 reader opened, and whether a later object still belongs to it.

S3 has no rename, so a writer replacing a dataset under a prefix (``nc2nczarr --overwrite``)
changes objects one by one while readers may hold the old metadata. Our writers follow one
protocol (see :mod:`.s3`): an overwrite deletes the root metadata *before* its first chunk,
and puts the new root metadata *after* its last one; an append puts its chunks (which leave
every old element as it was) before it replaces the root metadata. So a reader can tell a
chunk of another generation without any cooperation from the writer beyond that order:

* at open it pins the root metadata object it read first (``.zmetadata`` or ``.zgroup``):
  its ETag, Last-Modified and VersionId (exact on a versioned bucket), and the server's clock
  (``Date``) at that moment;
* a chunk (or any later object) whose Last-Modified is not older than that clock was written
  after the open, so the pinned root is asked again (one HEAD): gone or changed means another
  generation, and the read raises one clear error; unchanged means an append still under way
  or the same dataset, whose old elements are what they were, and the clock moves on to the
  HEAD's, so later chunks older than it are read without asking again;
* a chunk that is missing may be a never-written one (fill) or one the writer deleted, so the
  root is asked again too;
* metadata objects are read while opening, one after another: rather than ask after each
  (a young store's objects are all "newer" than a one-second clock), the reader asks once
  when it has read them all (:meth:`Generation.settle`). An overwrite deletes the root before
  any other object, so a root still unchanged then proves every object read before it was
  the opened dataset's. A consolidated store (one ``.zmetadata``) needs no question at all.

A store nobody writes pays nothing: its chunks are older than the open. The limit: S3's
Last-Modified has one-second resolution, so on an unversioned bucket a dataset written,
opened and entirely replaced by another with byte-identical root metadata all within one
second is not told apart; a versioned bucket's VersionId closes even that.
"""
from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Mapping
from typing import Any

from nczarr_conformance import keys, safety
from nczarr_conformance.errors import StoreError

Head = Callable[[str], Mapping[str, Any] | None]  # HEAD a key: its response, None when it is missing
#: What a reader pinned, as another process takes it over: the root key, its identity, the server clock then.
Pinned = tuple[str, tuple[object, ...] | None, dt.datetime | None]


class Generation:
    """The identity of the dataset an S3 reader opened; checks later objects against it."""

    def __init__(self, where: str, head: Head) -> None:
        self._where = where
        self._head = head
        self._lock = threading.Lock()
        self._key: str | None = None
        self._identity: tuple[object, ...] | None = None
        self._clock: dt.datetime | None = None
        self._unsettled = False  # metadata objects read besides the pinned one, not yet confirmed

    @staticmethod
    def _identity_of(response: Mapping[str, Any]) -> tuple[object, ...]:
        return response.get("ETag"), response.get("LastModified"), response.get("VersionId")

    @staticmethod
    def _server_clock(response: Mapping[str, Any]) -> dt.datetime | None:
        import email.utils  # only a signed S3 read has a server clock: others need not import the email package

        date = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
        try:
            return _utc(email.utils.parsedate_to_datetime(date)) if date else None
        except (TypeError, ValueError):
            return None

    @staticmethod
    def _written(response: Mapping[str, Any]) -> dt.datetime | None:
        """The pinned root's own Last-Modified: the clock when the server's ``Date`` is not at hand
        (obstore returns none). Earlier than the server's clock, so sound: an overwrite deletes that
        root before its first chunk, so an object written before the root is not the overwrite's."""
        modified = response.get("LastModified")
        return _utc(modified) if isinstance(modified, dt.datetime) else None

    def seen(self, key: str, response: Mapping[str, Any]) -> None:
        """An object was read: pin the first root metadata object, check anything read after it."""
        with self._lock:
            if self._key is None:
                if key in safety.ROOT_META:
                    self._key = key
                    self._identity = self._identity_of(response)
                    self._clock = self._server_clock(response) or self._written(response)
                return
            if key == self._key:
                return
            if keys.basename(key) in safety.META_NAMES:
                self._unsettled = True
                return
            modified = response.get("LastModified")
            if self._clock is not None and isinstance(modified, dt.datetime) and _utc(modified) < self._clock:
                return  # written before the open (or before the last check): the opened dataset's
        self._confirm(key)

    def missing(self, key: str) -> None:
        """A chunk was missing: fill in the opened dataset, or deleted by a writer replacing it."""
        if self._key is None:
            return
        if keys.basename(key) in safety.META_NAMES:
            with self._lock:
                self._unsettled = True
            return
        self._confirm(key)

    def pinned(self) -> Pinned | None:
        """The pinned root (key, identity, clock), for a reader in another process; None before one is read."""
        with self._lock:
            return None if self._key is None else (self._key, self._identity, self._clock)

    def restore(self, pinned: Pinned) -> None:
        """Hold to the root another process's reader pinned (:meth:`pinned`), as if this one had read it.

        Every later object is then checked against that root and that clock by the rules above: a
        worker reads what the client would read, or raises the same error.
        """
        with self._lock:
            self._key, self._identity, self._clock = pinned
            self._unsettled = False

    def settle(self) -> None:
        """Every metadata object is read: confirm, once, that they came from the dataset pinned."""
        with self._lock:
            unsettled, self._unsettled = self._unsettled, False
        if unsettled:
            self._confirm("its metadata")

    def _confirm(self, key: str) -> None:
        pinned = self._key
        if pinned is None:
            return
        response = self._head(pinned)
        if response is None or self._identity_of(response) != self._identity:
            raise StoreError(f"{self._where}: replaced by another writer while being read ({key.lstrip('/')} is not "
                             f"from the dataset opened: its {pinned.lstrip('/')} is gone or changed); nothing mixed "
                             "was returned, open it again")
        clock = self._server_clock(response)
        with self._lock:
            if clock is not None and (self._clock is None or clock > self._clock):
                self._clock = clock


def _utc(moment: dt.datetime) -> dt.datetime:
    """A server time as an aware UTC datetime (HTTP dates are GMT; a "-0000" zone parses naive)."""
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment
