"""The scrape: read every declared queue in at most two pipelined round trips, cache, render.

Round trip 1 (always), for each queue: LLEN and LINDEX 0 of the queue list, ZCARD of the started
(``wip``) and scheduled registries, ZCARD and ZCOUNT (the expired part) of the finished and failed
registries, SMEMBERS of the queue's worker set, HGETALL of the recorder's counters and LRANGE of
its last durations; plus one SMEMBERS of the paused set, one of rq's set of limit keys in use
(``<p>:rl-keys``, queues/producer/limits.py) and ``INFO memory`` / ``INFO stats`` of the server (used memory,
maxmemory, evicted keys: queues/connection/info.py). Round trip 2 (only when a queue has a waiting job or
a worker, or some limit key is in use): HGET ``enqueued_at`` of each queue's head job, EXISTS of each
worker key (rq leaves a dead worker in the set until a cleanup) and ZCARD of the held set of each
limit key of a declared queue (held jobs per queue: ``optima_queue_held_jobs``). No command writes: rq's ``.count`` on a
registry runs its cleanup (and failure callbacks), which a scrape must never trigger, so the
expired entries that cleanup would remove are counted with ZCOUNT and left out instead.

A command that fails for one queue (wrong type, ACL, ...) zeroes that queue only; a Redis that
refuses, drops or does not answer zeroes all of them. Either way the error gauge says so and one
line is logged; the collector itself never raises, so the rest of /metrics is still served. A
poison head job (an id that is not UTF-8, a key that is not a hash) only loses its queue's age. A
Redis that refuses INFO (an ACL without it) only loses the memory families: left out, not zeroed.
"""
import logging
import threading
import time
from dataclasses import dataclass, field

import redis
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from queues import conf

from queues.connection import info as redisinfo
from queues import keys as redis_keys
from queues.metrics import store

logger = logging.getLogger("queues.metrics")

STATES = ("waiting", "active", "delayed", "paused", "completed", "failed")
PER_QUEUE_COMMANDS = 11  # commands of round trip 1 per queue (see the module docstring)


@dataclass
class QueueSample:
    """What one scrape knows about one queue."""

    jobs: dict = field(default_factory=lambda: dict.fromkeys(STATES, 0))
    oldest_waiting_seconds: float = 0.0
    workers: int = 0
    durations_ms: list = field(default_factory=list)
    counters: dict = None  # None: unknown (Redis error) -> counter samples are left out, not zeroed
    buckets: dict = None  # upper bound (s) -> non-cumulative count
    dead_letters: int = 0
    held: int = 0  # jobs held back by their limit key (queues/producer/limits.py); not a state of ``jobs``
    outbox: int = 0  # jobs accepted and not yet in Redis (queues/producer/outbox.py); not a state of ``jobs`` either
    outbox_oldest_seconds: float = 0.0
    redis_error: bool = False
    database_error: bool = False


@dataclass
class Snapshot:
    queues: dict  # name -> QueueSample
    taken_at: float  # time.time() of the read
    read_seconds: float  # how long the read took
    redis_memory: redisinfo.Memory = None  # None: unknown (Redis or INFO failed) -> families left out


def _text(value):
    # Bytes that are not UTF-8 (planted) are escaped, never raised on: one poison value must not
    # leave every queue out of the scrape.
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value


def read_snapshot(names=None, client=None, now=None):
    """One read of every declared queue (or ``names``). Never raises for Redis or the database."""
    from queues.catalog import lookup as registry

    started = time.monotonic()
    names = list(registry.declared()) if names is None else list(names)
    client = client or store.scrape_client()
    now = time.time() if now is None else now
    samples = {name: QueueSample() for name in names}
    memory = _read_redis(client, names, samples, now)
    _read_dead_letters(samples)
    _read_outbox(samples, now)
    return Snapshot(queues=samples, taken_at=now, read_seconds=time.monotonic() - started, redis_memory=memory)


def _read_redis(client, names, samples, now):
    from rq.worker_registration import WORKERS_BY_QUEUE_KEY

    from queues.worker.pause import paused_key

    bounds = store.buckets()
    try:
        pipe = client.pipeline(transaction=False)
        pipe.smembers(paused_key())
        pipe.smembers(redis_keys.limit_keys_key())
        for name in names:
            queue_key = redis_keys.queue_key(name)
            pipe.llen(queue_key)
            pipe.lindex(queue_key, 0)  # rq pushes at the tail and pops at the head: the oldest
            pipe.zcard(redis_keys.started_key(name))
            pipe.zcard(redis_keys.scheduled_key(name))  # scored by run time, nothing expires
            # Scored by expiry time, -1 or +inf for "forever": what rq's cleanup would remove
            # (ZREMRANGEBYSCORE 0 now) is counted apart and left out, not removed.
            for registry_key in (redis_keys.finished_key(name), redis_keys.failed_key(name)):
                pipe.zcard(registry_key)
                pipe.zcount(registry_key, 0, now)
            pipe.smembers(WORKERS_BY_QUEUE_KEY % name)
            pipe.hgetall(store.counters_key(name))
            pipe.lrange(store.durations_key(name), 0, store.DURATION_SAMPLE - 1)
        redisinfo.add_reads(pipe)  # last, so the per-queue rows keep their offsets
        results = pipe.execute(raise_on_error=False)
    except redis.RedisError as exc:
        _all_failed(names, samples, exc)
        return None

    memory = _memory(*results[-2:])
    paused_result, limit_keys_result, results = results[0], results[1], results[2:-2]
    paused = set() if isinstance(paused_result, Exception) else {_text(n) for n in paused_result}
    if isinstance(paused_result, Exception):
        logger.warning("reading the paused set failed (%s); queues are reported as not paused",
                       _describe(paused_result))
    held_keys = _held_keys(limit_keys_result, names)
    heads, worker_sets = {}, {}
    for i, name in enumerate(names):
        row = results[i * PER_QUEUE_COMMANDS:(i + 1) * PER_QUEUE_COMMANDS]
        errors = [r for r in row if isinstance(r, Exception)]
        sample = samples[name]
        if errors:
            sample.redis_error = True
            logger.warning("reading queue %r failed (%s); it is reported as zeros",
                           name, _describe(errors[0]))
            continue
        queued, head, active, delayed, finished, finished_expired, failed, failed_expired, worker_keys, counters, \
            durations = row
        completed, failed = finished - finished_expired, failed - failed_expired
        is_paused = name in paused
        sample.jobs.update(waiting=0 if is_paused else queued, paused=queued if is_paused else 0,
                           active=active, delayed=delayed, completed=completed, failed=failed)
        sample.durations_ms = [float(d) for d in durations]
        counters = {_text(k): _text(v) for k, v in counters.items()}
        sample.counters = {k: int(counters.get(k, 0)) for k in (store.PROCESSED, store.FAILED, store.RETRIED,
                                                                 store.DEAD)}
        sample.counters[store.DURATION_SUM] = float(counters.get(store.DURATION_SUM, 0))
        sample.buckets = {b: int(counters.get(store.bucket_field(b), 0)) for b in bounds}
        if head is not None and not is_paused:
            heads[name] = head  # as Redis holds it (maybe not UTF-8)
        if worker_keys:
            worker_sets[name] = sorted(_text(k) for k in worker_keys)
    held_keys = {name: keys for name, keys in held_keys.items() if not samples[name].redis_error}
    if heads or worker_sets or held_keys:
        _read_round_two(client, heads, worker_sets, samples, now, held_keys)
    return memory


def _held_keys(members, names):
    """{queue: [held-set key, ...]} of the limit keys in use (rq's ``<p>:rl-keys``, whose members are
    ``<queue>:<limit key>``) of the declared ``names``. A failed read is logged: no held counts."""
    from queues.producer import limits

    if isinstance(members, Exception):
        logger.warning("reading the limit keys failed (%s); held jobs are reported as 0", _describe(members))
        return {}
    wanted, found = set(names), {}
    for member in members:
        queue_name, limit_key = limits.split(_text(member))
        if queue_name in wanted and limit_key:
            found.setdefault(queue_name, []).append(redis_keys.limit_held_key(_text(member)))
    return {name: sorted(keys) for name, keys in found.items()}


def _memory(memory_info, stats_info):
    errors = [r for r in (memory_info, stats_info) if isinstance(r, Exception)]
    if errors:
        logger.warning("reading the Redis memory (INFO) failed (%s); the redis memory metrics are left out",
                       _describe(errors[0]))
        return None
    try:
        return redisinfo.parse(memory_info, stats_info)
    except (TypeError, ValueError, AttributeError) as exc:
        logger.warning("the Redis INFO answer is not understood (%s); the redis memory metrics are left out",
                       _describe(exc))
        return None


def _read_round_two(client, heads, worker_sets, samples, now, held_keys=None):
    from rq.utils import utcparse

    held_keys = held_keys or {}
    unique_workers = sorted({k for keys in worker_sets.values() for k in keys})
    try:
        pipe = client.pipeline(transaction=False)
        for job_id in heads.values():
            pipe.hget(redis_keys.job_key_prefix().encode() + job_id, "enqueued_at")
        for key in unique_workers:
            pipe.exists(key)
        for keys in held_keys.values():
            for key in keys:
                pipe.zcard(key)
        results = pipe.execute(raise_on_error=False)
    except redis.RedisError as exc:
        _all_failed(set(heads) | set(worker_sets) | set(held_keys), samples, exc)
        return
    held_results = results[len(heads) + len(unique_workers):]
    results = results[:len(heads) + len(unique_workers)]
    offset = 0
    for name, keys in held_keys.items():
        counts = held_results[offset:offset + len(keys)]
        offset += len(keys)
        errors = [c for c in counts if isinstance(c, Exception)]
        if errors:  # a held set of the wrong type (planted): this queue's held count only
            logger.warning("reading the held jobs of queue %r failed (%s); reported as 0", name, _describe(errors[0]))
            continue
        samples[name].held = sum(counts)
    for name, enqueued_at in zip(heads, results[:len(heads)]):
        if isinstance(enqueued_at, redis.ResponseError) and "WRONGTYPE" in str(enqueued_at):
            # The head job's key is not a hash (a poison entry): no age, the queue's counts stand.
            logger.warning("the job at the head of queue %r cannot be read (%s); its age is reported as 0",
                           name, _describe(enqueued_at))
        elif isinstance(enqueued_at, Exception):
            _queue_failed(name, samples, enqueued_at)
        elif enqueued_at:  # a stale id without its job hash has no age
            try:
                waited = now - utcparse(_text(enqueued_at)).timestamp()
            except ValueError:
                continue
            samples[name].oldest_waiting_seconds = max(0.0, waited)
    alive = dict(zip(unique_workers, results[len(heads):]))
    for name, keys in worker_sets.items():
        errors = [alive[k] for k in keys if isinstance(alive[k], Exception)]
        if errors:
            _queue_failed(name, samples, errors[0])
        else:
            samples[name].workers = sum(1 for k in keys if alive[k])


def _queue_failed(name, samples, exc):
    if not samples[name].redis_error:
        logger.warning("reading queue %r failed (%s); it is reported as zeros", name, _describe(exc))
    samples[name] = QueueSample(redis_error=True, dead_letters=samples[name].dead_letters)


def _all_failed(names, samples, exc):
    from queues.connection.clients import mask_url, queues_url

    logger.warning("Redis at %s did not answer the scrape (%s); %d queue(s) are reported as zeros",
                   mask_url(queues_url()), _describe(exc), len(names))
    for name in names:
        samples[name] = QueueSample(redis_error=True)


def _describe(exc):
    # The type and redis' message; redis-py never puts the password in either.
    return f"{type(exc).__name__}: {exc}"


def _from_database(samples, what, read):
    """``read()``'s grouped query, in a savepoint (called inside a transaction, a failed query must
    not break the caller's). The database being down marks every queue's database error, logs one
    line naming ``what``, and returns None: the values stay zeros."""
    from django.db import DatabaseError, transaction

    try:
        with transaction.atomic():
            return read()
    except DatabaseError as exc:
        logger.warning("counting %s failed (%s); reported as zeros", what, _describe(exc))
        for sample in samples.values():
            sample.database_error = True
        return None


def _read_dead_letters(samples):
    """Open dead letters per queue: one grouped query."""
    from django.db.models import Count

    from queues.models import DeadLetter

    counts = _from_database(samples, "open dead letters", lambda: dict(
        DeadLetter.objects.filter(prefix=conf.prefix(), status=DeadLetter.Status.OPEN)
        .values_list("queue").annotate(n=Count("id")).order_by()))
    if counts is None:
        return
    for name, sample in samples.items():
        sample.dead_letters = counts.get(name, 0)


def _read_outbox(samples, now):
    """Outbox rows per queue and the age of the oldest (queues/producer/outbox.py): one grouped query."""
    from queues.producer import outbox

    stats = _from_database(samples, "the outbox", outbox.stats)
    if stats is None:
        return
    for name, sample in samples.items():
        rows, oldest = stats.get(name, (0, None))
        sample.outbox = rows
        sample.outbox_oldest_seconds = max(0.0, now - oldest.timestamp()) if oldest is not None else 0.0


class _Cache:
    """The last snapshot, reused for METRICS_CACHE_SECONDS; one read at a time per process."""

    def __init__(self):
        self.lock = threading.Lock()
        self.snapshot = None
        self.monotonic = 0.0

    def get(self, read=read_snapshot):
        ttl = float(conf.options()["METRICS_CACHE_SECONDS"])
        with self.lock:  # a scrape that arrives during a read waits for it and shares its result
            if self.snapshot is None or ttl <= 0 or time.monotonic() - self.monotonic >= ttl:
                self.snapshot = read()
                self.monotonic = time.monotonic()
            return self.snapshot

    def clear(self):
        with self.lock:
            self.snapshot = None


cache = _Cache()


def families(snapshot, prefix):
    """The metric families of a snapshot, in a fixed order (states too)."""
    p = f"{prefix}_queue"
    jobs = GaugeMetricFamily(f"{p}_jobs", "Jobs per queue and state (waiting, active, delayed, paused, "
                             "completed, failed), read from RQ's queue and registries.", labels=["queue", "state"])
    duration = GaugeMetricFamily(f"{p}_job_duration_ms", "Job run time (start to end) in milliseconds, "
                                 "nearest-rank quantile over the last 50 completed jobs.", labels=["queue", "quantile"])
    dead = GaugeMetricFamily(f"{p}_dead_letter", "Open dead letters (jobs that exhausted or lost their "
                             "retries and wait for an operator).", labels=["queue"])
    oldest = GaugeMetricFamily(f"{p}_oldest_waiting_seconds", "How long the job at the head of the queue "
                               "has been waiting (0 when none waits or the queue is paused).", labels=["queue"])
    workers = GaugeMetricFamily(f"{p}_workers", "Live workers listening on the queue.", labels=["queue"])
    hist = HistogramMetricFamily(f"{p}_job_duration_seconds", "Run time of every finished attempt "
                                 "(succeeded or failed), across all workers.", labels=["queue"])
    processed = CounterMetricFamily(f"{p}_jobs_processed", "Attempts that ran to an end (succeeded or failed).",
                                    labels=["queue"])
    failed = CounterMetricFamily(f"{p}_jobs_failed", "Attempts that raised (retried or not).", labels=["queue"])
    retried = CounterMetricFamily(f"{p}_jobs_retried", "Retries scheduled after a failed attempt.",
                                  labels=["queue"])
    dead_total = CounterMetricFamily(f"{p}_jobs_dead", "Jobs that reached the dead letter.", labels=["queue"])
    held = GaugeMetricFamily(f"{p}_held_jobs", "Jobs held back by their limit key: over the key's "
                             "limit_concurrency, waiting outside the queue for a slot.", labels=["queue"])
    error = GaugeMetricFamily(f"{p}_scrape_error", "1 when this scrape could not read the queue's values from "
                              "the source (redis or database); its values are then zeros.",
                              labels=["queue", "source"])
    outbox = GaugeMetricFamily(f"{p}_outbox", "Jobs accepted in a committed transaction (or durable=True) and "
                               "not yet written to Redis: the outbox's rows (a relay pushes them).", labels=["queue"])
    outbox_age = GaugeMetricFamily(f"{p}_outbox_oldest_age_seconds", "Age of the queue's oldest outbox row "
                                   "(0 when none): high means Redis does not take them or no relay runs.",
                                   labels=["queue"])
    for name, s in snapshot.queues.items():
        for state in STATES:
            jobs.add_metric([name, state], s.jobs[state])
        for q in store.QUANTILES:
            duration.add_metric([name, f"{q:g}"], store.nearest_rank(s.durations_ms, q))
        dead.add_metric([name], s.dead_letters)
        oldest.add_metric([name], round(s.oldest_waiting_seconds, 3))
        workers.add_metric([name], s.workers)
        held.add_metric([name], s.held)
        outbox.add_metric([name], s.outbox)
        outbox_age.add_metric([name], round(s.outbox_oldest_seconds, 3))
        error.add_metric([name, "redis"], 1 if s.redis_error else 0)
        error.add_metric([name, "database"], 1 if s.database_error else 0)
        if s.counters is None:
            # Unknown is not zero: a counter that dropped to 0 would read as a reset to rate().
            continue
        cumulative, running = [], 0
        for bound, count in s.buckets.items():
            running += count
            cumulative.append(("+Inf" if bound == float("inf") else f"{bound:g}", running))
        hist.add_metric([name], cumulative, sum_value=s.counters[store.DURATION_SUM])
        processed.add_metric([name], s.counters[store.PROCESSED])
        failed.add_metric([name], s.counters[store.FAILED])
        retried.add_metric([name], s.counters[store.RETRIED])
        dead_total.add_metric([name], s.counters[store.DEAD])
    return [jobs, duration, dead, oldest, workers, hist, processed, failed, retried, dead_total, held, outbox, outbox_age, error,
            *memory_families(snapshot.redis_memory, prefix)]


def memory_families(memory, prefix):
    """The server's memory (queues/connection/info.py): no labels, one Redis. Empty families when unknown."""
    p = f"{prefix}_redis"
    used = GaugeMetricFamily(f"{p}_memory_used_bytes", "Memory the queues' Redis uses (INFO memory used_memory).")
    limit = GaugeMetricFamily(f"{p}_memory_max_bytes", "maxmemory of the queues' Redis; 0 means no limit.")
    evicted = CounterMetricFamily(f"{p}_evicted_keys", "Keys the queues' Redis evicted since it started "
                                  "(INFO stats evicted_keys); with noeviction it stays 0.")
    if memory is not None:
        used.add_metric([], memory.used_bytes)
        limit.add_metric([], memory.max_bytes)
        evicted.add_metric([], memory.evicted_keys)
    return [used, limit, evicted]


class QueueCollector(Collector):
    """prometheus_client collector of every declared queue (registered in REGISTRY by the app)."""

    def __init__(self, snapshot_cache=None):
        self.cache = snapshot_cache or cache

    def describe(self):
        # Names only: REGISTRY.register() calls describe(), so registering never touches Redis.
        empty = Snapshot(queues={}, taken_at=0.0, read_seconds=0.0)
        return families(empty, _prefix())

    def collect(self):
        try:
            snapshot = self.cache.get()
            return families(snapshot, _prefix())
        except Exception:  # /metrics must still serve the process, HTTP and database metrics
            logger.exception("the queue collector failed; queue metrics are left out of this scrape")
            return []


def _prefix():
    prefix = conf.options()["METRICS_PREFIX"]
    if not isinstance(prefix, str) or not store.METRIC_NAME_RE.fullmatch(prefix):
        return "optima"  # reported by the system check queues.E050
    return prefix
