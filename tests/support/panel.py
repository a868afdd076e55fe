"""Helpers of the operator-surface tests: staff users with panel permissions, dead and finished jobs
and a registered worker in Redis."""

import base64

from django.contrib.auth.models import Permission
from django.utils import timezone
from rq.job import JobStatus
from rq.registry import FailedJobRegistry, FinishedJobRegistry
from rq.results import Result

from queues import conf
from queues.catalog.lookup import get_queue

BASIC_USER = "ops"
BASIC_PASSWORD = "s3cret-board-pass"


def basic_header(user=BASIC_USER, password=BASIC_PASSWORD):
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"HTTP_AUTHORIZATION": f"Basic {token}"}


def make_staff(django_user_model, username, *perms, password="pw-for-tests-1"):
    """An active staff user holding ``perms`` ("queues.view_queue_panel", ...)."""
    user = django_user_model.objects.create_user(username, password=password, is_staff=True)
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    return django_user_model.objects.get(pk=user.pk)  # fresh: no stale permission cache


def dead_job(
    name="default",
    func="tests.jobs.sample.add",
    args=(2, 3),
    kwargs=None,
    *,
    row=True,
    exc_type="RuntimeError",
    exc_message="boom",
    job_id=None,
):
    """A job in ``name``'s failed registry, as the worker leaves a dead one (signed, as queues.enqueue
    wrote it), plus its DeadLetter row. Returns (job, row or None)."""
    from queues.jobs import signing
    from queues.models import DeadLetter

    queue = get_queue(name)
    job = queue.create_job(
        func,
        args=list(args),
        kwargs=dict(kwargs or {}),
        job_id=job_id,
        meta={"queue": name, "attempts_allowed": 1, "attempt": 1, "dead": "exhausted", "deaths": 1},
    )
    job.origin = name
    job.signature = signing.sign(job)
    job._status = JobStatus.FAILED
    job.ended_at = timezone.now()
    traceback = f'Traceback (most recent call last):\n  File "job.py", line 1\n{exc_type}: {exc_message}\n'
    with queue.connection.pipeline() as pipe:
        job.save(pipeline=pipe)
        FailedJobRegistry(queue=queue).add(job, ttl=-1, exc_string=traceback, pipeline=pipe)
        Result.create_failure(job, -1, exc_string=traceback, pipeline=pipe)
        pipe.execute()
    dl = None
    if row:
        dl = DeadLetter.objects.create(
            prefix=conf.prefix(),
            queue=name,
            job_id=job.id,
            func_path=func,
            args=list(args),
            kwargs=dict(kwargs or {}),
            exc_type=exc_type,
            exc_message=exc_message,
            traceback=traceback,
            attempts_made=1,
            attempts_allowed=1,
            reason="exhausted",
            dead_at=timezone.now(),
        )
    return job, dl


def finished_job(name="default", func="tests.jobs.sample.add", args=(2, 3), return_value=5):
    """A job in ``name``'s finished registry with its successful result, as a worker leaves it."""
    queue = get_queue(name)
    job = queue.create_job(func, args=list(args), meta={"queue": name})
    job.origin = name
    job._status = JobStatus.FINISHED
    job.ended_at = timezone.now()
    with queue.connection.pipeline() as pipe:
        job.save(pipeline=pipe)
        FinishedJobRegistry(queue=queue).add(job, ttl=-1, pipeline=pipe)
        Result.create(job, Result.Type.SUCCESSFUL, ttl=600, return_value=return_value, pipeline=pipe)
        pipe.execute()
    return job


def registered_worker(connection, name="panel-test-worker", queue="default"):
    """The keys of an idle worker of ``queue`` as rq registers one; returns its key."""
    from rq.worker import Worker

    key = f"{Worker.redis_worker_namespace_prefix}{name}"
    connection.hset(
        key,
        mapping={
            "birth": "2026-01-01T00:00:00Z",
            "last_heartbeat": "2026-01-01T00:00:00Z",
            "queues": queue,
            "state": "idle",
        },
    )
    connection.sadd(Worker.redis_workers_keys, key)
    connection.sadd(f"{Worker.redis_worker_namespace_prefix.rstrip(':')}s:{queue}", key)
    return key


def place(connection, rid, where, queue="default"):
    """Put the id ``rid`` (str or bytes) into ``where`` of ``queue``: its list, or one of its registries
    (started, finished, failed, scheduled (due in an hour), deferred, canceled), as a planted entry."""
    import time

    from queues.keyspace import keys

    future = time.time() + 3600
    q = get_queue(queue)
    if where == "queued":
        connection.rpush(q.key, rid)
        return
    if where == "started":
        member = (rid + b":exec1") if isinstance(rid, bytes) else f"{rid}:exec1"
        connection.zadd(keys.started_key(queue), {member: future})
        return
    registry = {
        "finished": q.finished_job_registry,
        "failed": q.failed_job_registry,
        "scheduled": q.scheduled_job_registry,
        "deferred": q.deferred_job_registry,
        "canceled": q.canceled_job_registry,
    }[where]
    connection.zadd(registry.key, {rid: future if where == "scheduled" else "+inf"})


def good_hash(connection, job_id=None, origin="default"):
    """The raw hash of a valid JSON job (written under ``job_id``, or an id rq makes, read back, deleted),
    to plant under another id or with a field changed."""
    job = get_queue("default").create_job(
        "tests.jobs.sample.add", args=[1, 2], job_id=job_id, meta={"queue": "default"}
    )
    job.origin = origin
    job._status = JobStatus.FAILED
    job.save()
    raw = connection.hgetall(job.key)
    connection.delete(job.key)
    return raw


def prefix_dump(connection, prefix):
    """Every key under ``prefix`` with its type, content and whether it expires, but the count of reported
    entries (``entries.report``'s own): equal before and after a page proves the page wrote nothing.
    Content, not DUMP's bytes: a read of a large hash (HGET, HMGET) moves Redis's incremental rehash of it on
    a step (dictFind), which reorders DUMP's fields without any write."""
    found = connection.scan_iter(match=f"{prefix}*")
    return {k: _content(connection, k) for k in found if not k.endswith(b":quarantined")}


def _content(connection, key):
    kind = connection.type(key)
    read = {
        b"hash": connection.hgetall,
        b"set": connection.smembers,
        b"zset": lambda k: connection.zrange(k, 0, -1, withscores=True),
        b"list": lambda k: connection.lrange(k, 0, -1),
        b"string": connection.get,
        b"stream": connection.xrange,
    }[kind]
    return kind, read(key), connection.ttl(key) >= 0
