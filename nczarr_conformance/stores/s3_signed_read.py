"""Which signed S3 reads go through obstore instead of botocore, and with what credentials.

Why: a read's open paid ~0.25 s for botocore (its import, ~0.1 s, and the JSON service model it parses
for every new client, ~0.05 s, plus the client itself) before the first GET; obstore makes its client in
milliseconds. A point's time series from S3 took 2× TensorStore's time, most of it that open
(reports/read.md, issue 35).

obstore signs with what it is given; it reads no ``~/.aws`` profile. So a reader goes through obstore
only when every input botocore would use is one obstore is handed here, and stays on botocore
(stores/s3.py, unchanged) whenever botocore could find something obstore cannot:

* credentials: ``AWS_ACCESS_KEY_ID`` and ``AWS_SECRET_ACCESS_KEY`` (and ``AWS_SESSION_TOKEN`` when set)
  in the environment, which botocore's own chain takes first too; without both, botocore (a profile's
  keys, SSO, an instance role: its whole provider chain);
* no profile named (``aws.profile=`` / ``awsprofile=`` in the URL, ``profile`` in storage options,
  ``AWS_PROFILE``, ``AWS_DEFAULT_PROFILE``): a profile is read by botocore;
* a region from the storage options, the URL (``aws.region=``), ``AWS_REGION`` or ``AWS_DEFAULT_REGION``,
  or no AWS config file at all (``AWS_CONFIG_FILE``, ``~/.aws/config``) that might name one: else botocore;
* no ``AWS_RETRY_MODE``, which only botocore honours (``AWS_MAX_ATTEMPTS`` is honoured by both: obstore's
  retries are that many attempts less one), and no ``AWS_CA_BUNDLE`` unless the endpoint is plain
  ``http://`` (a bundle only changes whom TLS trusts; obstore's are the system's roots);
* storage options limited to the endpoint and the region, as the signed store takes (any other key goes
  to botocore's store, which refuses it in one line).

Writers (and ``lock_for_writing``) stay on botocore: the marker's conditional PUT, the ordered commit
and multipart uploads are built on it. The reader's guarantees are RemoteStore's (stores/remote.py):
bounded reads, 3 attempts a request (or ``AWS_MAX_ATTEMPTS``), ``NCZARR_REMOTE_TIMEOUT``, one-line
errors naming the object, and the generation pin (stores/s3_generation.py) that detects a dataset
replaced while being read.
"""
from __future__ import annotations

import os
from pathlib import Path

from nczarr_conformance.urls import StoreSpec

#: what botocore honours and obstore does not: with any of them set, the read stays on botocore
BOTOCORE_ONLY_ENV = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_RETRY_MODE")
#: storage option names the signed store takes (s3.py's ``_SIGNED_OPTIONS``), profile aside
_PLACE_OPTIONS = frozenset({"endpoint_url", "endpoint", "region_name", "region"})


def obstore_credentials(spec: StoreSpec, endpoint: str | None) -> dict[str, str] | None:
    """obstore's credential settings for a signed read of ``spec`` at ``endpoint`` (None: AWS's), or None
    when botocore must read it (see the module docstring for each reason)."""
    if spec.kind != "s3" or spec.anonymous:
        return None
    env = os.environ
    if any(env.get(name) for name in BOTOCORE_ONLY_ENV):
        return None
    if env.get("AWS_CA_BUNDLE") and not (endpoint or "").lower().startswith("http://"):
        return None
    if spec.params.get("aws.profile") or spec.params.get("awsprofile"):
        return None
    for name, value in spec.options.items():
        if name == "client_kwargs" and isinstance(value, dict):
            if not set(value) <= _PLACE_OPTIONS:
                return None
        elif name == "anon":
            if value:
                return None
        elif name not in _PLACE_OPTIONS:
            return None  # profile, or a key the botocore store refuses in its own words
    key, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
    if not key or not secret:
        return None
    if region_of(spec) is None and _config_file().exists():
        return None  # the default profile's region may be there: botocore reads it
    credentials = {"access_key_id": key, "secret_access_key": secret}
    if env.get("AWS_SESSION_TOKEN"):
        credentials["session_token"] = env["AWS_SESSION_TOKEN"]
    return credentials


def region_of(spec: StoreSpec) -> str | None:
    """The region the storage options, the URL or the environment name, else None."""
    flat = dict(spec.options)
    if isinstance(flat.get("client_kwargs"), dict):
        flat.update(flat["client_kwargs"])
    named = flat.get("region") or flat.get("region_name") or spec.params.get("aws.region") or \
        os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    return str(named) if named else None


def read_attempts(default: int) -> int:
    """Attempts a request: ``AWS_MAX_ATTEMPTS`` (as botocore takes it) or ``default``."""
    text = os.environ.get("AWS_MAX_ATTEMPTS", "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else default


def _config_file() -> Path:
    return Path(os.environ.get("AWS_CONFIG_FILE") or Path.home() / ".aws" / "config").expanduser()
