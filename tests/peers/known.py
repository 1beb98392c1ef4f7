"""Strict xfails that only a peer can satisfy.

Use with ``@pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason=...)`` and end the test with
``still_wrong(seen, wrong=..., right=...)``: a fixed peer (``seen == right``) XPASSes, which strict makes red;
the known wrong result, exactly, raises ``PeerStillWrong`` (the only expected failure); anything else — a
different wrong result, a failed precondition, our own code raising, a tool that could not run — is an
ordinary failure, because it is not ``PeerStillWrong``.
"""
from __future__ import annotations

from typing import Any


class PeerStillWrong(Exception):
    """The peer still gives exactly the known wrong result."""


def still_wrong(seen: Any, *, wrong: Any, right: Any) -> None:
    if seen == right:
        return
    assert seen == wrong, f"the peer changed its behaviour: {seen!r} (known wrong: {wrong!r}, right: {right!r})"
    raise PeerStillWrong(repr(seen))
