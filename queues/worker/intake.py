"""From the queues to a job the worker may run, in the worker's main process.

``Intake.next_job`` is rq's dequeue loop (``dequeue_job_and_maintain_ttl``) made safe: the pop is
``Dequeuer``'s (pause-aware, atomic, ``dequeue.py``); between waits it runs the housekeeping,
sees a stop request, and waits out a Redis outage instead of dying.

Trust boundary (``jobs/gate.py``): a popped job runs only when it reads as JSON, names a declared
job (``catalog/``) and carries a valid signature (``jobs/signing.py``); otherwise it is refused —
dead-lettered (``corrupt``, ``not_a_job``, ``unsigned``) or dropped — without anything of it
imported, and the worker goes on. ``Intake.refuse`` takes one shape whatever the refusal:
the queue, the job id, and ``bury()``, the refusal itself.

Replay (issue 32, ``gate.replayed``, ``gate.elsewhere``): a popped id whose hash says the job must not run
again (finished, dead, stopped, started by a live worker) and that no path of the app put back
(``jobs.meta.PUT_BACK``), or whose hash belongs to another queue, is dropped from the intermediate list with
one WARNING (``gate.report_dropped``), never dead-lettered: its hash is left as it is.
"""

import time

from rq.exceptions import NoSuchJobError, StopRequested
from rq.worker.base import WorkerStatus

from queues import rqcompat
from queues.connection.outage import REDIS_ERRORS, wait_until_reachable
from queues.failures import refused
from queues.jobs import capped, gate
from queues.jobs import meta as jobmeta
from queues.keyspace import entries, keys, repeats
from queues.producer import limits
from queues.worker import popstart
from queues.worker.abandoned import give_back, live_workers
from queues.worker.dequeue import Dequeuer

SUSPENSION_CHECK_EVERY = 1.0  # seconds between two of rq's checks for ``rq suspend`` (one round trip each)

# ``Intake._judge``'s verdicts on a popped job: it runs, or how ``fetch`` refuses (dead-letters) or drops it
RUNS, NO_DATA, GONE, UNREADABLE, ELSEWHERE, REFUSED, REPLAYED = (
    "runs",
    "no data",
    "gone",
    "unreadable",
    "elsewhere",
    "refused",
    "replayed",
)


class Intake:
    def __init__(self, worker):
        self.worker = worker
        self.dequeuer = Dequeuer(
            worker.connection,
            poll_cap=worker.resilience.multi_queue_poll,
            should_stop=lambda: worker.stop.requested,
            log=worker.log,
            who=f"Worker {worker.name}",
            on_empty=self._went_empty,
            before_redis=worker.start_held,
            plan=lambda count: popstart.plan(worker, count),
        )
        self._paused_logged = set()
        self._next_suspension_check = 0.0
        self._idle_written = None  # the outage episodes seen when IDLE was last written
        self.busy_written = None  # the outage episodes seen when BUSY was last written (attempt.begin)

    def suspension_due(self):
        """True at most once per ``SUSPENSION_CHECK_EVERY`` seconds: time for rq's suspension check."""
        moment = time.monotonic()
        if moment < self._next_suspension_check:
            return False
        self._next_suspension_check = moment + SUSPENSION_CHECK_EVERY
        return True

    def busy_lost(self):
        """Whether an outage since BUSY was last written could have lost it (``attempt.begin`` writes it again)."""
        return self.busy_written != self.worker.outage.episodes

    def _went_empty(self):
        """The pop found no job, before it waits for one: the worker IDLE (a fork-free worker stays BUSY from one
        job of a drain to the next: ``adapter.WorkerBehaviour.idle_with_success``) and the counts its successes
        left to write (``fastpath.Tally``), written now rather than after the wait."""
        self._idle()
        self.worker.housekeeping.flush(idle=True)

    def _idle(self):
        """The worker's state IDLE, unless what that writes is written already (IDLE by the MULTI of a
        concurrent worker's success, ``fastpath.py``, or BUSY while its other jobs run) and no outage could
        have lost it since."""
        worker = self.worker
        if worker.get_state() == worker.resting_state() and self._idle_written == worker.outage.episodes:
            return
        self._idle_written = worker.outage.episodes
        worker.set_state(WorkerStatus.IDLE)

    def pop_ahead(self):
        """The next pop, as a command to send in the round trip of the success just being written (``fastpath.finish``,
        ``batch.execute_multi``'s ``then``), or None when it must wait for the loop: a fork-free worker
        (``WorkerBehaviour.pops_ahead``) pops right after writing a success anyway, so the pop rides on it and
        saves the job a round trip (3 a job, not 4, with its enqueue; issue 36). None while a stop is asked for,
        and when rq's loop has the suspension check or the maintenance to run first (a suspended worker must not
        hold a popped job). Once sent, the reply goes to the dequeuer (``Dequeuer.sent``) and is the next pop's
        first look; a job so popped and then not started goes back to the head of its queue (``give_back_ahead``,
        the worker's teardown). If the connection drops before the reply is read, a job it moved waits in the
        intermediate list, as after any pop lost that way, until the abandoned-job scan puts it back."""
        worker = self.worker
        if not worker.pops_ahead or self.dequeuer.holds() or worker.stop.requested:
            return None
        if time.monotonic() >= self._next_suspension_check or worker.should_run_maintenance_tasks:
            return None
        queues = rqcompat.ordered_queues(worker)
        return queues, self.dequeuer.command(queues, worker.jobs_to_pop())

    def give_back_ahead(self, held_over=None):
        """The jobs popped and never taken go back to the head of their queues (the worker's teardown, a stop past
        its grace): the one popped ahead (``pop_ahead``) and those a pop of several took beyond the one it returned
        (``Dequeuer.pop``'s ``count``); with ``held_over``, only if those were popped that many seconds ago
        (``Dequeuer.take_popped``). -> how many were taken."""
        try:
            left = self.dequeuer.take_popped(held_over)
        except REDIS_ERRORS:
            return 0  # left in the intermediate list: the abandoned-job scan returns them
        for popped in reversed(left):  # each to the head: the last first, so that they keep their order
            queue, job_id = popped
            try:
                if popped.started is not None:
                    self.unstart(queue, popped)
                give_back(self.worker.connection, queue.key, job_id)
            except REDIS_ERRORS:
                pass  # in the intermediate list, or started by a worker now gone: the abandoned-job scan returns it
        return len(left)

    def next_job(self, timeout, max_idle_time=None):
        """(job, queue) vetted and ready to start; None when ``timeout`` (or ``max_idle_time``)
        passed with nothing to run; raises rq's StopRequested when the worker is to stop."""
        worker = self.worker
        worker.procline("Listening on " + ",".join(worker.queue_names()))
        idle_until = None if max_idle_time is None else time.monotonic() + max_idle_time
        while True:
            worker.heartbeat()
            if worker.should_run_maintenance_tasks:
                worker.run_maintenance_tasks()
            worker.housekeeping.tick()
            if worker.stop.requested:
                raise StopRequested()
            if self.dequeuer.unanswered:  # pops whose replies were lost may have started jobs: back to their queues
                self._reclaim()
            wait = timeout
            if wait is not None and idle_until is not None:
                wait = max(1, min(wait, int(idle_until - time.monotonic() + 0.999)))
            try:
                # rq asks INFO once and caches it: asked here, inside the outage handling and before a pop (it
                # was asked after the pop, where a failover's refused connection ended the worker).
                version = worker.get_redis_server_version()
                found = self.dequeuer.pop(rqcompat.ordered_queues(worker), wait, count=worker.jobs_to_pop())
                self._log_paused()
                if found is None:
                    worker.housekeeping.flush(idle=True)
                    if timeout is None or (idle_until is not None and time.monotonic() >= idle_until):
                        return None
                    continue
                queue, job_id = found
                job = self.fetch(queue, job_id, found.data, found)
            except REDIS_ERRORS as exc:
                worker.outage.failed(exc, "dequeue")
                wait_until_reachable(
                    worker.connection, worker.backoff, worker.outage, should_stop=lambda: worker.stop.requested
                )
                continue
            if job is None:
                continue
            if worker.stop.requested:
                if found.started is not None:
                    self.unstart(queue, found)
                give_back(worker.connection, queue.key, job.id)
                raise StopRequested()
            worker.reorder_queues(reference_queue=queue)
            job.redis_server_version = version
            worker.log.debug("Worker %s: %s: %s", worker.name, queue.name, job.id)  # its outcome is the INFO line
            return job, queue

    def fetch(self, queue, job_id, data=None, popped=None):
        """The popped job, read as JSON and vetted (``gate.vet``); None when it must not run: then it
        is dead-lettered or dropped (``gate``), never the end of the worker. ``data``: its hash as the
        pop read it (``Popped.data``), or None to read it now. A job its pop started (``popped.started``,
        ``popstart.py``) that may run carries its pop to ``attempt.begin`` (``popstart.carry``); one that may not is
        unstarted first, then refused or dropped as any popped job. The job is judged once (``_judge``), then
        acted on."""
        verdict, job, detail = self._judge(queue, job_id, data)
        started = popped is not None and popped.started is not None
        if verdict is RUNS:
            return popstart.carry(job, popped) if started else job
        if started:
            self.unstart(queue, popped)
        worker = self.worker
        if verdict is NO_DATA:
            return self.refuse(
                queue=queue, job_id=job_id, bury=lambda: refused.bury_raw(worker, queue, job_id, "has no data field")
            )
        if verdict is UNREADABLE:
            return self.refuse(queue=queue, job_id=job_id, bury=lambda: refused.bury_raw(worker, queue, job_id, detail))
        if verdict is REFUSED:
            self.refuse(queue=queue, job_id=job.id, bury=lambda: refused.refuse(worker, job, queue, detail))
            if limits.is_limited(job):  # refused without running: its limit key's slot goes to the next
                limits.release(job)
            return None
        worker.connection.lrem(keys.intermediate_key(queue.key), 1, job_id)
        if verdict is GONE:
            repeats.report(  # once a minute with a count: 200,000 bogus ids were 200,000 ERROR lines (issue 32)
                repeats.DROPPED,
                queue.key,
                "Worker %s: dropped job %s of queue %s: its hash %s is gone",
                worker.name,
                job_id,
                queue.name,
                keys.job_key(job_id),
                log=worker.log,
                connection=worker.connection,
            )
        else:  # ELSEWHERE (planted in this queue's list: the job lives in its own queue), REPLAYED (its id pushed
            # again): the job's hash is the real one's, left as it is
            gate.report_dropped(job.id, f"popped from queue {queue.name} but {detail}")
        return None

    def _judge(self, queue, job_id, data):
        """What ``fetch`` does with the popped job, decided without a write: (verdict, the job or None, detail)."""
        worker = self.worker
        try:
            job = self._read(job_id, data)
        except entries.TooLarge as exc:  # a NoSuchJobError: first
            return UNREADABLE, None, str(exc)
        except NoSuchJobError:
            return (NO_DATA if worker.connection.exists(keys.job_key(job_id)) else GONE), None, None  # no data field
        except REDIS_ERRORS:
            raise
        except Exception as exc:  # noqa: BLE001 — e.g. a pickled or garbled hash, a key of another type
            return UNREADABLE, None, f"cannot be read ({type(exc).__name__})"
        home = gate.elsewhere(job, queue.name)
        if home is not None:
            return ELSEWHERE, job, f"its hash belongs to queue {home}"
        try:
            refusal = gate.vet(job, queue.name)
        except REDIS_ERRORS:
            raise
        except Exception as exc:  # noqa: BLE001 — whatever the job holds, the gate refuses it: never the worker's end
            worker.log.error(
                "Worker %s: the gate raised on job %s of queue %s: refused as corrupt",
                worker.name,
                job.id,
                queue.name,
                exc_info=True,
            )
            refusal = gate.Refusal(gate.CORRUPT, f"could not be vetted ({type(exc).__name__})")
        if refusal is not None:
            return REFUSED, job, refusal
        put_back = (data or {}).get(jobmeta.PUT_BACK.encode())  # taken off by the pop (dequeue.py)
        why = gate.replayed(job, put_back=put_back, is_alive=self._is_alive)
        if why is not None:
            return REPLAYED, job, why
        return RUNS, job, None

    def _is_alive(self, name):
        """Whether the worker ``name`` is alive (``gate.replayed`` asks it of a started job's worker)."""
        return bool(live_workers(self.worker.connection, [name]))

    def unstart(self, queue, popped):
        """``popstart.unstart``; when Redis does not answer, the start is left to ``popstart.reclaim`` (by the next
        loop, or by the abandoned-job scan once the worker is gone) and the error raised."""
        try:
            popstart.unstart(self.worker.connection, queue, popped)
        except REDIS_ERRORS:
            self.dequeuer.unanswered.append([popped.started[1]])
            raise

    def _reclaim(self):
        lost = self.dequeuer.lost()
        try:
            popstart.reclaim(self.worker, lost)
        except REDIS_ERRORS:
            return  # Redis away still: the next loop tries again
        self.dequeuer.unanswered.clear()

    def _read(self, job_id, data):
        """The job from its hash (as the pop read it, else read now, size-checked); ``entries.TooLarge`` from
        ``OptimaJob.restore`` before rq inflates its ``data`` whole (``entries.too_large``)."""
        worker = self.worker
        if not data:
            data = self._read_capped(job_id)
        job = worker.job_class(job_id, connection=worker.connection, serializer=worker.serializer)
        job.restore(data)  # what rq's fetch does with the hash it reads
        return job

    def _read_capped(self, job_id):
        """The job's hash read as rq's ``Job.fetch`` reads it (NoSuchJobError for no hash, a ``WRONGTYPE`` raised), but
        never sent whole when it is over ``entries.RUN_STORED_BYTES`` (``capped``): then ``entries.TooLarge``."""
        fields = capped.read(self.worker.connection, keys.job_key(job_id), budget=entries.RUN_STORED_BYTES)
        if isinstance(fields, capped.Oversized):
            raise entries.TooLarge(fields.why_to_run)
        if isinstance(fields, Exception):
            raise fields
        if not fields:
            raise NoSuchJobError(f"No such job: {keys.job_key(job_id)}")
        return fields

    def refuse(self, *, queue, job_id, bury):
        """Refuse a popped job: ``bury()`` (one of ``gate``'s refusals). If even that fails (other
        than by a Redis outage, which the dequeue loop waits out), the id is dropped from the
        intermediate list with an ERROR. Always None: nothing to run."""
        worker = self.worker
        try:
            bury()
        except REDIS_ERRORS:
            raise
        except Exception:  # noqa: BLE001
            worker.log.exception(
                "Worker %s: could not dead-letter job %s of queue %s; dropped from the queue "
                "(its hash %s is left as it is)",
                worker.name,
                job_id,
                queue.name,
                keys.job_key(job_id),
            )
            worker.connection.lrem(keys.intermediate_key(queue.key), 1, job_id)
        return None

    def _log_paused(self):
        worker = self.worker
        paused = self.dequeuer.paused & set(worker.queue_names())
        if paused != self._paused_logged:
            if paused:
                worker.log.info("Worker %s: paused queues left alone: %s", worker.name, ", ".join(sorted(paused)))
                worker.procline("Paused: " + ", ".join(sorted(paused)))
            else:
                worker.log.info("Worker %s: no paused queue any more", worker.name)
            self._paused_logged = paused
