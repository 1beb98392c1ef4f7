"""nczarr_conformance/workers.py: a pool of long-lived line workers gives each call in flight a worker of its
own (reads on parallel threads never share one, so replies never interleave) and keeps them for later calls."""
from __future__ import annotations

import json
import os
import sys
import threading

from nczarr_conformance.workers import WorkerPool

ECHO_PID = ("import json, os, sys, time\n"
            "for line in sys.stdin:\n"
            "    time.sleep(0.5)\n"
            "    request = json.loads(line)\n"
            "    answer = json.dumps({'pid': os.getpid(), 'asked': request['n']})\n"
            "    print(json.dumps({'id': request['id'], 'stdout': answer}), flush=True)\n")


def test_calls_in_flight_get_a_worker_each_and_the_workers_are_kept():
    pool = WorkerPool([sys.executable, "-c", ECHO_PID], lambda: os.environ, None)
    answers: dict[int, dict[str, object]] = {}

    def ask(n: int) -> None:
        status, line, _ = pool.call({"n": str(n)}, 30)
        assert status == 0
        answers[n] = json.loads(line)

    try:
        threads = [threading.Thread(target=ask, args=(n,)) for n in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert {a["asked"] for a in answers.values()} == {"0", "1"}  # each reply is its own call's
        assert answers[0]["pid"] != answers[1]["pid"]  # in flight together: two workers
        assert pool._idle.qsize() == 2
        ask(2)
        assert answers[2]["pid"] in {answers[0]["pid"], answers[1]["pid"]}  # a kept worker answered
    finally:
        pool.close()
    assert pool._idle.qsize() == 0
