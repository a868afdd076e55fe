"""Dequeueing that cannot lose a job, for one queue or several.

rq 3.0 dequeues from a single queue with BLMOVE into ``<p>:queue:<q>:intermediate`` (Redis >= 6.2),
so a worker killed between the pop and the started registry leaves the job in that list, where it
can be found. With several queues it still uses BLPOP (``Queue.lpop``): a kill between the pop and
the started registry loses the job outright (rq issues #1716, #2079).

OptimaWorkers replace only the several-queue case: one Lua script LMOVEs the head of the first
non-empty queue, in the worker's priority order, into that queue's intermediate list, atomically.
Redis has no blocking multi-key LMOVE, so an idle multi-queue worker polls: at once after a job,
then after 50 ms, doubling up to ``MULTI_QUEUE_POLL_SECONDS`` (0.5 s) — one cheap script call per
poll, the way Sidekiq Pro's reliable fetch does it. Its queue order (priority) is kept, and pause
(``queues.pause``) keeps working: it narrows the list of queues passed in.

The alternative — one worker process per queue — would keep rq's BLMOVE but multiply processes
(a Django process each) and lose the priority order between queues; see docs/operations.md.

The job then leaves the intermediate list in the same MULTI that records it as started
(``ResilienceMixin.prepare_execution``); a job stranded there by a killed worker is pushed back to the
head of its queue by the abandoned-job scan.

Stopping: a worker asked to stop checks it before every pop, and a job popped while the request
arrived is given back to the head of its queue, untouched.
"""
import time

from rq.exceptions import DequeueTimeout, StopRequested
from rq.utils import as_text

from .abandoned import give_back, intermediate_key

LMOVE_ANY_LUA = """
for i = 1, #KEYS, 2 do
  local id = redis.call('LMOVE', KEYS[i], KEYS[i + 1], 'LEFT', 'RIGHT')
  if id then
    return {KEYS[i], id}
  end
end
return false
"""

FIRST_POLL_SECONDS = 0.05


class ReliableDequeue:
    """Mixed into the worker's queue class (``queues.resilience.reliable_queue_class``)."""

    worker = None  # the worker of this process (a class attribute of the per-worker subclass)

    @classmethod
    def dequeue_any(cls, queues, timeout, connection, job_class=None, serializer=None, death_penalty_class=None):
        worker = cls.worker
        if worker is not None:
            worker._holding = False
            if worker._stop_requested:
                raise StopRequested()
        queues = list(queues)
        if len(queues) == 1:
            result = super().dequeue_any(queues, timeout, connection=connection, job_class=job_class,
                                         serializer=serializer, death_penalty_class=death_penalty_class)
        else:
            result = cls._poll_any(queues, timeout, connection, job_class, serializer, death_penalty_class)
        if result is not None and worker is not None:
            if worker._stop_requested:
                job, queue = result
                give_back(connection, queue.key, job.id)
                raise StopRequested()
            worker._holding = True  # from here on the worker's start of the job sees a stop request
        return result

    @classmethod
    def _poll_any(cls, queues, timeout, connection, job_class, serializer, death_penalty_class):
        keys = []
        for queue in queues:
            keys += [queue.key, intermediate_key(queue.key)]
        script = connection.register_script(LMOVE_ANY_LUA)
        worker = cls.worker
        cap = worker.resilience.multi_queue_poll if worker is not None else 0.5
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = FIRST_POLL_SECONDS
        while True:
            found = script(keys=keys)
            if found:
                queue_key, job_id = (as_text(v) for v in found)
                result = cls._fetch_dequeued_job(connection, queue_key, job_id, job_class=job_class,
                                                 serializer=serializer, death_penalty_class=death_penalty_class)
                if result is not None:
                    return result
                connection.lrem(intermediate_key(queue_key), 1, job_id)  # its hash is gone
                continue
            if deadline is None:
                return None  # burst: nothing anywhere
            left = deadline - time.monotonic()
            if left <= 0:
                raise DequeueTimeout(timeout, [q.key for q in queues])
            if worker is not None and worker._stop_requested:
                raise StopRequested()
            time.sleep(min(pause, left))
            pause = min(pause * 2, cap)
