"""The outbox for a batch (``queues.enqueue_many`` inside a transaction, or ``durable=True``).

One row per job, as a single enqueue writes it (queues/producer/outbox.py), so that everything that
reads the outbox — ``job_state``, ``cancel``, the relay, ``stats`` — sees each job of a batch as it
sees any other. What is per batch is the cost: the rows are inserted in one statement, already
claimed by the committing process under one token; after the commit the whole batch is written to
Redis in one MULTI (``write.write_many``, the ids explicit so that nothing is written twice) and its
rows deleted in one statement. When that write fails, the claims are let go at once and the relay
pushes the rows one by one, as it does any row; when an id already exists in Redis (a caller's
``job_id`` taken meanwhile, or an earlier push that wrote the batch and died before the delete),
each row is pushed on its own by the single-row path, which tells the two apart.
"""

import logging
import time
import uuid

from django.db import DatabaseError, connections, transaction
from django.db.models import F
from django.utils import timezone

from queues import conf
from queues.exceptions import InvalidJob, QueueUnavailable
from queues.producer import outbox

logger = logging.getLogger("queues.outbox")


def stage_many(queue, jobs, when, *, explicit_ids):
    """Accept the built, signed ``jobs`` through the outbox: their rows now (in the caller's transaction
    if there is one), the push to Redis after the commit (at once outside a transaction)."""
    Entry = outbox._model()
    using = outbox._using()
    token = uuid.uuid4().hex
    staged = time.monotonic()
    now = timezone.now()
    claimed_until = now + timezone.timedelta(seconds=outbox.PUSH_GRACE)
    prefix = conf.prefix()
    Entry.objects.using(using).bulk_create(
        [
            Entry(
                prefix=prefix,
                queue=queue.name,
                job_id=job.id,
                job=outbox.encode(job.to_dict()),
                due_at=when,
                explicit_id=explicit_ids,
                unique_key="",
                created_at=now,
                claimed_by=token,
                claimed_until=claimed_until,
            )
            for job in jobs
        ]
    )
    push = _BatchPush(token, staged, queue, jobs, when)
    if connections[using].in_atomic_block:
        transaction.on_commit(push.after_commit, using=using, robust=True)  # as outbox.stage: never breaks others
    else:
        push.after_commit()


class _BatchPush:
    """The committing process's push of its own rows (it still holds the jobs: no decode)."""

    __slots__ = ("token", "staged", "queue", "jobs", "when")

    def __init__(self, token, staged, queue, jobs, when):
        self.token, self.staged, self.queue, self.jobs, self.when = token, staged, queue, jobs, when

    def rows(self):
        return outbox._model().objects.using(outbox._using()).filter(claimed_by=self.token)

    def after_commit(self):
        from queues.producer.write import write_many  # no cycle: to the top once issue 32's edits here are merged

        jobs = self.jobs
        if time.monotonic() - self.staged > outbox.PUSH_GRACE / 2:
            # A long transaction: renew the claims; rows a relay took meanwhile are its to push.
            try:
                self.rows().update(claimed_until=timezone.now() + outbox._lease())
                mine = set(self.rows().values_list("job_id", flat=True))
            except DatabaseError as exc:  # the rows are committed: a relay pushes them
                logger.warning(
                    "outbox: could not claim a batch of %d jobs after the commit (%s); a relay will push them",
                    len(jobs),
                    type(exc).__name__,
                )
                return
            jobs = [job for job in jobs if job.id in mine]
            if not jobs:
                return
        try:
            write_many(self.queue, jobs, self.when, explicit_ids=True)
        except QueueUnavailable as exc:
            self.rows().update(
                claimed_until=None, claimed_by="", push_attempts=F("push_attempts") + 1, last_error=str(exc)[:2000]
            )
            logger.warning("outbox: a batch of %d jobs stays in the outbox, Redis did not take it: %s", len(jobs), exc)
            return
        except InvalidJob:
            self._one_by_one(jobs)
            return
        self.rows().delete()

    def _one_by_one(self, jobs):
        """Some id of the batch exists in Redis: each row through the single-row push, which writes the
        others, drops a row whose id another job holds (logged), and deletes a row already written."""
        pks = dict(self.rows().values_list("job_id", "pk"))
        for job in jobs:
            if job.id in pks and not outbox._push_claimed(pks[job.id], self.queue, job, self.when, None):
                self.rows().update(claimed_until=None, claimed_by="")  # Redis refused: the relay takes the rest
                return
