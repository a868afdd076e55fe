"""What the worker does with a popped job its gate refused (``queues/jobs/gate.py``: ``vet``): a dead
letter (``deadletter.bury``; ``bury_corrupt`` with the raw hash of one that cannot be read as a job), or,
for a canceled job, only its id dropped. Either way the id leaves the intermediate list. A burial is logged
through ``keyspace/repeats.py`` (a flood of them on one queue is a line a minute with a count); a canceled
id is named by one INFO per pop, as a replayed id is by one WARNING (``jobs/gate.py``), up to a flood's worth a
minute, and counted."""

import logging

import redis

from queues.failures import deadletter
from queues.jobs import capped
from queues.jobs.gate import CANCELED, CORRUPT, DROPPED_NAMED_PER_MINUTE
from queues.keyspace import keys, repeats


def refuse(worker, job, queue, refusal):
    """Dead-letter a fetched job that must not run, and take it out of the intermediate list."""
    connection = worker.connection
    if refusal.reason == CORRUPT:
        bury_raw(worker, queue, job.id, refusal.why)
        return
    if refusal.reason == CANCELED:  # not a failure: dropped, not dead-lettered
        connection.lrem(keys.intermediate_key(queue.key), 1, job.id)
        # Each id left behind is named, as a replayed id is (jobs/gate.py: ``report_dropped``), up to a flood's
        # worth a minute; counted in /metrics all the same.
        repeats.report(
            repeats.REFUSED,
            queue.key,
            "Worker %s: job %s of queue %s was canceled: dropped, not run",
            worker.name,
            job.id,
            queue.name,
            log=worker.log,
            level=logging.INFO,
            connection=connection,
            burst=DROPPED_NAMED_PER_MINUTE,
        )
        return
    deadletter.bury(
        job, reason=refusal.reason, exc_string=f"Refused, not run: job {job.id} {refusal.why}", worker_name=worker.name
    )
    connection.lrem(keys.intermediate_key(queue.key), 1, job.id)
    repeats.report(
        repeats.REFUSED,
        queue.key,
        "Worker %s: job %s of queue %s dead-lettered without running (%s): it %s",
        worker.name,
        job.id,
        queue.name,
        refusal.reason,
        refusal.why,
        log=worker.log,
        connection=connection,
    )


def bury_raw(worker, queue, job_id, why):
    """A job whose hash cannot be read as a job: dead-lettered as ``corrupt`` with its raw hash kept;
    a key that is not a hash (or is gone) is only dropped from the queue, with an ERROR naming it."""
    connection = worker.connection
    key = keys.job_key(job_id)
    fields = capped.read(connection, key)  # size-checked: a planted 100 MB hash stays in Redis
    if isinstance(fields, redis.ResponseError):  # WRONGTYPE: not a hash
        fields = None
    elif isinstance(fields, Exception):
        raise fields
    if fields:
        count = fields.count if isinstance(fields, capped.Oversized) else None
        deadletter.bury_corrupt(connection, job_id, queue.name, fields, why, worker_name=worker.name, count=count)
    else:
        repeats.report(
            repeats.DROPPED,
            queue.key,
            "Worker %s: dropped job %s of queue %s: its key %s %s",
            worker.name,
            job_id,
            queue.name,
            key,
            "is not a hash" if fields is None else "is gone",
            log=worker.log,
            connection=connection,
        )
    connection.lrem(keys.intermediate_key(queue.key), 1, job_id)
