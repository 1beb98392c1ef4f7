"""Exception hierarchy; each class carries the exit code the CLIs map it to.

Exit codes follow docs/contracts/check-report.md: 2 means "could not do the job"
(bad usage, unreadable or unreachable store, input that is not a dataset).
"""
from __future__ import annotations


class NczarrError(Exception):
    """Base of every error this package raises on purpose."""

    exit_code = 2


class UsageError(NczarrError):
    """The command line or the call asked for something impossible."""


class StoreError(NczarrError):
    """A store could not be opened, read or written."""


class StoreUnavailableError(StoreError):
    """The store did not answer (5xx or a cut-short body after every retry, an unreachable endpoint).

    It says nothing about the dataset, so nczarr-check reports "could not check" (exit 2)
    instead of grading it as a finding about an object, which StoreError on one object is.
    """


class FormatError(NczarrError):
    """The bytes are there but they are not a dataset we can read."""


#: What a reader of either Zarr version looked for at a store's root and did not find
NO_DATASET = "no dataset here: none of /.zgroup, /.zarray (Zarr v2) or /zarr.json (Zarr v3) exists"


class NoDatasetError(FormatError):
    """No root metadata at all: the store, or the URL, holds no dataset. Its own class so that each layer
    can say it better where it knows more (a v3 reader looked too; an HTTP server answered 404 for the URL)."""


class UnsupportedError(FormatError):
    """A valid dataset uses something the chosen flavor or reader cannot express."""


class MissingDependencyError(NczarrError):
    """A package this job needs is not installed (a codec numcodecs builds only with it): the line names the
    package to install, since nothing about the input or the command is wrong."""


class DuplicateIdError(UsageError, ValueError):
    """Two registrations claim one id (a peer, a check rule, a fix): the line names where each came from,
    so a plugin that clashes with a built-in, or with another plugin, is found without a traceback."""
