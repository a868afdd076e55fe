"""Quick jobs popped ahead of what the worker can run at once (issue 36).

A pop costs a round trip and the pop script's own commands (EVALSHA, SISMEMBER, an LPOP a band) whatever the
number of jobs it takes. A worker whose jobs are quick would otherwise pay them for every job or two: the slots of a
concurrent worker free one at a time, and the fork-free worker pops one job on its success's round trip. So while
the jobs a worker ran lately are quick (``Prefetch.run_time``, a moving average of their run times, under
``PREFETCH_BELOW_SECONDS``), one pop takes more: up to ``--concurrency`` jobs beyond the free slots
(``concurrent.OptimaConcurrentWorker.jobs_to_pop``), ``FORK_FREE_AHEAD`` for the fork-free worker
(``adapter.OptimaSimpleWorker``). The jobs beyond wait in the dequeuer, started by the pop, about one job's run time.

(Issue 21 measured a buffer ahead of the slots on 100 ms jobs and left it out: it did not move their rate. On
quick jobs it does: docs/decisions.md.) What such a buffer gets wrong, a job held behind a long one (the classic
complaint of Celery's prefetch), is bounded two ways: only quick jobs are popped ahead, and a job held longer than
``PREFETCH_HOLD_SECONDS`` (a longer job took the worker meanwhile) goes back to the head of its queue, its start
taken back and no attempt counted, for another worker (``give_back_held``, through ``intake.Intake.give_back_ahead``,
the path of a worker that ends with jobs popped); the worker then pops ahead no more until its jobs are quick again.
The concurrent worker looks while every slot is taken (its main thread), and gives them back at once when asked to
stop, before it waits out its running jobs' grace; the fork-free worker, whose only working thread runs the long job,
looks from its lifeline's beat.
"""

PREFETCH_BELOW_SECONDS = 0.05  # jobs whose average run time is under this are popped ahead
PREFETCH_HOLD_SECONDS = 1.0  # a job popped ahead and held longer than this goes back to its queue
RUN_TIME_WEIGHT = 0.1  # a job's weight in the moving average
FORK_FREE_AHEAD = 8  # jobs the fork-free worker's pop takes while its jobs are quick
FIRST_RUNS_KEPT = 1_000  # job functions whose first run the worker remembers (then it forgets them all)


class Prefetch:
    """One worker's view of its jobs' run time, and what it pops ahead because of it."""

    def __init__(self):
        self.run_time = None  # seconds a job of this worker ran, a moving average; None: none counted yet
        self.ran = set()  # the job functions this worker has run: the first run of each is not counted

    def quick(self):
        """Whether the jobs this worker ran lately were quick enough to pop ahead of its capacity."""
        return self.run_time is not None and self.run_time < PREFETCH_BELOW_SECONDS

    def note(self, job):
        """Count the run time of ``job``, ended, into ``run_time``; not the first run of its function in this
        process, whose time includes the import of its module (and of what it imports: a few hundred ms on a busy
        machine, which kept a fresh worker's average over the threshold for a few dozen quick jobs)."""
        if job.func_name not in self.ran:
            if len(self.ran) >= FIRST_RUNS_KEPT:
                self.ran.clear()
            self.ran.add(job.func_name)
            return
        if job.started_at is None or job.ended_at is None:
            return
        seconds = max(0.0, (job.ended_at - job.started_at).total_seconds())
        self.run_time = (
            seconds if self.run_time is None else self.run_time + RUN_TIME_WEIGHT * (seconds - self.run_time)
        )

    def give_back_held(self, worker):
        """The jobs ``worker`` popped ahead and held longer than ``PREFETCH_HOLD_SECONDS``: back to the head of their
        queues, in their order (``intake.Intake.give_back_ahead``), and no more popping ahead until the jobs are
        quick again."""
        count = worker.intake.give_back_ahead(held_over=PREFETCH_HOLD_SECONDS)
        if not count:
            return
        self.run_time = max(self.run_time or 0.0, PREFETCH_HOLD_SECONDS)
        worker.log.info(
            "Worker %s: %d job(s) popped ahead of a free slot went back to the head of their queues: the worker "
            "busy for over %g s",
            worker.name,
            count,
            PREFETCH_HOLD_SECONDS,
        )
