"""The worker's lifeline thread (queues/worker/liveness.py): its errands, what signal handlers hand it."""

import threading
import types

from queues.worker.liveness import Lifeline
from tests.support import wait_for


def test_the_lifeline_runs_an_errand_at_once_in_its_own_thread_and_the_rest_when_stopped(queue_redis):
    """Issue 32, finding 10: a signal handler hands its log line and Redis write to the lifeline."""
    ran = []
    options = types.SimpleNamespace(liveness_ttl=30, liveness_interval=600, recovery_grace=600, abandoned_scan=600)
    lifeline = Lifeline("errands-w1", queue_redis, options, lambda: [])
    lifeline.start()
    lifeline.errand(lambda connection: ran.append(threading.current_thread().name))
    wait_for(lambda: ran, timeout=10, message="the errand to run (the lifeline beats every 600 s here)")
    assert ran == ["optima-lifeline"]
    lifeline.stop()
    lifeline.errand(lambda connection: ran.append("after"))
    lifeline.run_errands()
    assert ran == ["optima-lifeline", "after"]
