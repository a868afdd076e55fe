"""The poison harness's planter table: key family x corruption kind -> one bad entry in Redis.

The planters are in ``poison_jobs`` (queue lists, job hashes field by field, registries, executions,
results streams) and ``poison_keys`` (worker sets and hashes, both schedulers' keys, schedule
templates, limit and unique keys, history samples, pause sets, counters, the workers' own locks);
``tests/queues/trust/test_poison_fuzz.py`` plants them all and runs everything against them.

``PLANTERS[(family, kind)](ctx, mark)`` writes one entry with Redis commands only (what whoever can
write to the queues' Redis can do) and returns a ``Planted`` saying how to recognise it afterwards:
``mark`` (a token ``pzNNN`` put into every planted id, member and value) and ``marks`` (keys an
ERROR line may name instead), ``aside`` (a key that may be renamed to ``<key>.corrupt-<time>``),
``job_ids`` (whose pages are opened), ``allowed``: a check of what the entry did when nothing
reported it because nothing had to (docs/decisions.md's threat model: what a writer to Redis can
still do, such as hold a lock, keep an entry rq never cleans because its score is below 0, or change
a field of a signed job that the signature does not cover), and ``required``: a check that holds
whatever else accounts for the entry (a forged dead job is ``unverified``, never ``exhausted``).

One Redis state holds every entry, so a container holds either bad members or the wrong type,
never both: the wrong types are planted on queue ``content``'s keys (and on the singletons named
below), the bad members on queue ``default``'s. ``BIG`` is 5 MB, not the issue's 50 MB: it keeps
the harness within its budget and is still 20 times every cap of ``queues/keyspace/entries.py``.
NaN cannot be a sorted-set score (Redis refuses it): the scores planted are -1, +inf and 1e308.
"""

from dataclasses import dataclass, field

from django.urls import reverse
from rq.job import JobStatus
from rq.registry import CanceledJobRegistry, DeferredJobRegistry

from queues.catalog.lookup import OptimaJob
from queues.jobs import read as jobread
from queues.jobs import signing
from queues.keyspace import keys

BIG = 5 * 1024 * 1024  # bytes: see the module docstring
FORGED = "2026-12-01 13.00.00,000 CRITICAL forged"
GOOD, BAD = "default", "content"  # bad members go into GOOD's keys, wrong types onto BAD's
DEFAULT_INDEX = 1  # django-rq numbers queues by sorted name: content 0, default 1, ...


@dataclass
class Planted:
    family: str = ""
    kind: str = ""
    mark: str = ""  # set by ``plant_all``
    marks: list = field(default_factory=list)
    aside: str = ""
    job_ids: list = field(default_factory=list)  # as Redis holds them
    allowed: object = None  # callable(connection, answers) -> "" when it did what is documented, else why not
    required: object = None  # the same


@dataclass
class Context:
    connection: object
    trap: object  # a directory: any file in it means a planted job ran
    owner: int  # the API caller's user id (unique keys are scoped by it)


PLANTERS = {}


def planter(family, kind):
    def register(function):
        PLANTERS[(family, kind)] = function
        return function

    return register


# --- helpers --------------------------------------------------------------------------------------


def job(
    ctx,
    job_id,
    *,
    queue=GOOD,
    func="tests.jobs.sample.add",
    args=(2, 3),
    signed=True,
    status=JobStatus.QUEUED,
    fields=None,
    raw_id=None,
):
    """A job hash written under ``job_id`` (signed unless told), its fields then overwritten with
    ``fields``; under ``raw_id`` instead (an id rq rejects, bytes) when given. -> the id Redis holds."""
    made = OptimaJob.create(
        func,
        args=list(args),
        connection=ctx.connection,
        id=job_id,
        origin=queue,
        meta={"queue": queue, "attempt": 1, "attempts_allowed": 1},
        status=status,
    )
    if signed:
        made.signature = signing.sign(made)
    made.save()
    if fields:
        ctx.connection.hset(made.key, mapping=fields)
    if raw_id is None:
        return job_id
    ctx.connection.rename(
        made.key, keys.job_key_prefix().encode() + (raw_id if isinstance(raw_id, bytes) else raw_id.encode())
    )
    return raw_id


def queued(ctx, job_id, queue=GOOD):
    ctx.connection.rpush(keys.queue_key(queue), job_id)
    return job_id


def registry_key(place, queue):
    return {
        "started": keys.started_key,
        "finished": keys.finished_key,
        "failed": keys.failed_key,
        "scheduled": keys.scheduled_key,
        "deferred": DeferredJobRegistry.key_template.format,
        "canceled": CanceledJobRegistry.key_template.format,
    }[place](queue)


def member(place, job_id):
    """The registry member of ``job_id`` (rq's started registry holds ``<job id>:<execution id>``)."""
    if place != "started":
        return job_id
    return job_id + (b":e1" if isinstance(job_id, bytes) else ":e1")


def trap_job(ctx, mark, **options):
    """An unsigned job that would create a file in the trap directory if it ever ran."""
    return job(
        ctx, f"{mark}-trap", func="tests.jobs.sample.touch", args=[str(ctx.trap / mark)], signed=False, **options
    )


def job_page(answers, job_id):
    """The response to the GET of ``job_id``'s panel page, or None."""
    return answers.get(("GET", reverse("django_rq:job_detail", args=[DEFAULT_INDEX, jobread.shown_id(job_id)])))


def plant_all(ctx, pairs=None):
    """Every planter of ``pairs`` (default: all) in one Redis state; -> [Planted], marks ``pz000``..."""
    planted = []
    for number, pair in enumerate(sorted(PLANTERS) if pairs is None else pairs):
        mark = f"pz{number:03d}"
        entry = PLANTERS[pair](ctx, mark)
        entry.family, entry.kind, entry.mark = (*pair, mark)
        planted.append(entry)
    return planted


from tests.support import poison_jobs, poison_keys  # noqa: E402,F401 (they fill PLANTERS; they import this module)
