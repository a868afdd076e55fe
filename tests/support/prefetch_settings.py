"""Settings of the worker processes of the prefetch give-back tests (``tests.support.worker``,
``assert_jobs_popped_ahead_go_back``): the site's, with the run-time threshold under which a worker pops quick
jobs ahead (``queues.worker.prefetch.PREFETCH_BELOW_SECONDS``) at 0.5 s instead of 0.05.

Those tests are about what happens to jobs popped ahead (held behind a long job, given back); that a worker pops
ahead at all depends on its quick jobs' measured run time, which a loaded CI box stretches past 0.05 s now and then
(CI failed on it once: a worker that never popped ahead gave nothing back). The default threshold is tested where
it decides: tests/queues/worker/test_prefetch.py, ``test_a_worker_whose_jobs_are_not_quick_pops_only_for_its_free_
slots``, and test_round_trips.py's 20 commands a job, which a burst worker makes only by popping ahead.
``queues.worker.prefetch`` imports nothing of rq or Django: importing it here leaves rq's key prefix to the app
(``queues.E006``)."""

from optima_site.settings import *  # noqa: F401,F403
from queues.worker import prefetch

prefetch.PREFETCH_BELOW_SECONDS = 0.5
