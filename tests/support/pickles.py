"""Pickles planted in the queues' Redis and every URL of the panel, for the tests that prove nothing the web
reads runs code (tests/queues/trust/)."""

import pickle
import time
import zlib

from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rq.job import Job
from rq.results import Result
from rq.worker import Worker

from queues import conf
from queues.catalog.lookup import get_queue

DEFAULT = 1  # django-rq numbers queues by sorted name: content 0, default 1, ...


PLACES = ("queued", "started", "finished", "failed", "scheduled", "deferred", "canceled")


class Boom:
    """Unpickling it creates the file ``path``: proof that pickle ran on what Redis held."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def plant(connection, trap):
    """One pickled job per place of queue "default"; returns {place: job_id}."""
    queue = get_queue("default", connection=connection)
    past, future = time.time() - 3600, time.time() + 3600
    ids = {}
    for place in PLACES:
        job_id = f"planted-{place}"
        job = Job.create(
            "tests.jobs.sample.add",
            args=[Boom(trap / f"{place}-args")],
            id=job_id,
            connection=connection,
            origin="default",
        )  # rq's default serializer: pickle
        job.meta = {"x": Boom(trap / f"{place}-meta")}
        job.save()
        Result.create(job, Result.Type.SUCCESSFUL, ttl=600, return_value=Boom(trap / f"{place}-result"))
        connection.hset(
            job.key,
            mapping={
                "result": pickle.dumps(Boom(trap / f"{place}-legacy-result")),
                # rq keeps exception info as zlib-compressed text: a protocol-0 pickle is text.
                "exc_info": zlib.compress(pickle.dumps(Boom(trap / f"{place}-exc-info"), protocol=0)),
                "status": "started" if place == "queued" else place,
            },
        )
        ids[place] = job_id
    connection.rpush(queue.key, ids["queued"])
    connection.zadd(queue.started_job_registry.key, {f"{ids['started']}:planted-execution": past})
    # Its execution, as a worker writes it: the started list then shows the execution's job, which
    # rq's ``Execution.job`` would fetch with pickle.
    connection.hset(
        f"{conf.prefix()}:execution:{ids['started']}:planted-execution",
        mapping={"created_at": past, "last_heartbeat": past, "worker_name": "planted", "job_id": ids["started"]},
    )
    connection.zadd(queue.finished_job_registry.key, {ids["finished"]: past})
    connection.zadd(queue.failed_job_registry.key, {ids["failed"]: past})
    connection.zadd(queue.scheduled_job_registry.key, {ids["scheduled"]: future})
    connection.zadd(queue.deferred_job_registry.key, {ids["deferred"]: past})
    connection.zadd(queue.canceled_job_registry.key, {ids["canceled"]: past})
    # A busy worker of that queue whose current job is the planted started one.
    worker_key = f"{Worker.redis_worker_namespace_prefix}planted"
    connection.hset(
        worker_key,
        mapping={
            "birth": "2026-01-01T00:00:00Z",
            "last_heartbeat": "2026-01-01T00:00:00Z",
            "queues": "default",
            "state": "busy",
            "current_job": ids["started"],
        },
    )
    connection.sadd(Worker.redis_workers_keys, worker_key)
    connection.sadd(f"{Worker.redis_worker_namespace_prefix.rstrip(':')}s:default", worker_key)
    return ids, worker_key


def panel_urls(sample):
    """Every URL the panel's URLconf serves (namespace django_rq), each pattern's arguments filled in."""
    sample = {"batch_id": "some-batch", **sample}  # the Batches pages (issue 34): an unknown batch answers 404
    resolver = get_resolver()
    urls = set()
    for namespace, (_, sub) in resolver.namespace_dict.items():
        if namespace != "django_rq":
            continue
        for _, pattern in _walk(sub):
            names = set(getattr(pattern.pattern, "converters", {})) or set(pattern.pattern.regex.groupindex)
            urls.add(reverse(f"django_rq:{pattern.name}", kwargs={n: sample[n] for n in names}))
    return sorted(urls, reverse=True)  # the dashboard last: every other page gets the first go


def _walk(resolver, prefix=""):
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            yield from _walk(entry, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix, entry
