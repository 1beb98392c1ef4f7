"""S3 reads over a network that fails (issue 20 item 11), against moto behind the fault proxy (faulty_s3.py).

A body cut short (fewer bytes than its Content-Length, then the connection drops) is fetched
again under the client's retry policy, so what is read is what a healthy network gives; a
store that keeps answering 5xx is "could not check" (exit 2, one line), never a finding
about the dataset. The expected dump is the one read straight from moto, past the proxy.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from nczarr_conformance.errors import StoreUnavailableError
from nczarr_conformance.stores.s3 import READ_ATTEMPTS, S3Store
from tests.stores.faulty_s3 import Fault
from tests.test_output_safety import one_line

pytestmark = pytest.mark.s3


@pytest.fixture
def stored(tmp_path, s3_bucket, moto_server) -> str:
    """A healthy dataset on moto (written past the proxy): v, 4 zlib chunks; t, 2 chunks; its URL."""
    import netCDF4

    src = tmp_path / "src.nc"
    rng = np.random.default_rng(11)
    with netCDF4.Dataset(str(src), "w") as nc:
        nc.createDimension("x", 64)
        nc.createVariable("v", "f4", ("x",), chunksizes=(16,), zlib=True)[:] = rng.random(64, dtype="f4")
        nc.createVariable("t", "i4", ("x",), chunksizes=(32,))[:] = np.arange(64)
    url = f"s3://{s3_bucket}/p#mode=nczarr,s3"  # parametrized runs share a bucket (its name is cut at 40)
    done = run("convert", "--overwrite", str(src), url, endpoint=moto_server)
    assert done.returncode == 0, done.stderr
    return url


def run(tool: str, *args: str, endpoint: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, **({"AWS_ENDPOINT_URL": endpoint} if endpoint else {}))
    return subprocess.run([sys.executable, "-m", f"nczarr_conformance.cli.{tool}", *args], capture_output=True,
                          text=True, check=False, timeout=120, env=env)


def cut(fault_key: str, times: int) -> Fault:
    """GETs of keys matching ``fault_key``: the first ``times`` of each send 40% of the body, then drop."""
    return Fault("GET", fault_key, truncate=0.4, times=times)


def test_cut_short_bodies_are_fetched_again_dump_equals_healthy(faulty, stored, moto_server):
    healthy = run("dump", stored, endpoint=moto_server)
    assert healthy.returncode == 0 and "v = 0." in healthy.stdout, healthy.stderr
    # each retry waits as botocore's standard policy says (up to 1 s, then 2 s): few cuts keep the test short
    faulty.faults = [cut(r"/p/v/3$", READ_ATTEMPTS - 1), cut(r"/p/(v/[012]|t/0|\.zmetadata)$", 1)]
    dumped = run("dump", stored)
    assert dumped.returncode == 0, dumped.stderr
    assert dumped.stdout == healthy.stdout
    seen = {key: n for f in faulty.faults for key, n in f.seen.items()}
    assert seen[f"{stored.split('/')[2]}/p/v/3"] == READ_ATTEMPTS  # cut twice, whole the third time
    assert len(seen) == 6 and min(seen.values()) >= 2  # v/0..3, t/0, .zmetadata each cut at least once


def test_check_deep_through_cut_short_bodies_finds_nothing(faulty, stored):
    faulty.faults = [cut(r"/p/v/1$", READ_ATTEMPTS - 1), cut(r"/p/(v/[023]|\.zgroup|t/\.zarray)$", 1)]
    checked = run("check", "--deep", "--format", "json", stored)
    report = json.loads(checked.stdout)
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert checked.returncode == 0 and errors == [], checked.stdout
    assert list(faulty.faults[0].seen.values()) == [READ_ATTEMPTS]  # v/1 came whole on the last attempt


def test_cut_short_on_every_attempt_is_one_unavailable_line(faulty, stored):
    store = S3Store(stored.split("/")[2], "p")
    faulty.faults = [cut(r"/p/t/0$", 99)]
    with pytest.raises(StoreUnavailableError, match=rf"cut short \(.*\) on each of {READ_ATTEMPTS} attempts") as err:
        store.get("/t/0", limit=1 << 20)
    assert "\n" not in str(err.value) and faulty.faults[0].seen == {f"{stored.split('/')[2]}/p/t/0": READ_ATTEMPTS}


def test_cut_short_bodies_wait_botocores_backoff_between_attempts(faulty, stored, monkeypatch):
    """A body cut short is fetched again with the same backoff as botocore's standard retries: its
    ExponentialBackoff between attempts, waited for. The jitter is pinned at its maximum here, so the
    policy says 1 s, then 2 s (base 2, attempt numbers 1 and 2)."""
    import time

    from botocore.retries import standard

    delays: list[float] = []

    class FullJitter(standard.ExponentialBackoff):
        def __init__(self, *args, **kw):
            super().__init__(*args, **{**kw, "random": lambda: 1.0})

        def delay_amount(self, context):
            delays.append(super().delay_amount(context))
            return delays[-1]

    monkeypatch.setattr(standard, "ExponentialBackoff", FullJitter)
    store = S3Store(stored.split("/")[2], "p")
    faulty.faults = [cut(r"/p/t/0$", 99)]
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError):
        store.get("/t/0", limit=1 << 20)
    assert delays == [2.0 ** n for n in range(READ_ATTEMPTS - 1)]
    assert time.monotonic() - started >= sum(delays)


@pytest.mark.parametrize("key,deep", [(r"/p/v/3$", True), (r"/p/t/\.zarray$", False), (r"/p/\.zgroup$", False)],
                         ids=["chunk", "metadata", "root"])
def test_persistent_503_is_could_not_check_not_a_finding(faulty, stored, key, deep):
    faulty.faults = [Fault("GET", key, 503, "ServiceUnavailable", times=10**6)]
    checked = run("check", *(["--deep"] if deep else []), stored)
    one_line(checked, 2, "could not check", "ServiceUnavailable", f"gave up after {READ_ATTEMPTS} attempts")
    assert checked.stdout == ""  # no report: nothing was graded


def test_persistent_503_fails_the_dump_in_one_line(faulty, stored):
    faulty.faults = [Fault("GET", r"/p/v/2$", 503, "ServiceUnavailable", times=10**6)]
    one_line(run("dump", stored), 2, "ServiceUnavailable", "get /v/2", f"gave up after {READ_ATTEMPTS} attempts")
