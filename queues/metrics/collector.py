"""The collector: one snapshot of every declared queue (``scrape``: Redis in at most two round trips;
``database``: the database counts), kept METRICS_CACHE_SECONDS, rendered as the metric families of
the table in ``queues.metrics``. The collector itself never raises, so the rest of /metrics is
still served whatever Redis or the database do.
"""

import logging
import threading
import time

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from queues import conf
from queues.catalog import lookup as registry
from queues.connection import servers
from queues.metrics import database, redis_memory, scrape, store
from queues.metrics.snapshot import STATES, QueueSample, Snapshot

logger = logging.getLogger("queues.metrics")


def read_snapshot(names=None, client=None, now=None):
    """One read of every declared queue (or ``names``). Never raises for Redis or the database.

    Each Redis server of the queues (QUEUES_REDIS_SERVERS) is read apart, in its own round trips, for the
    queues that live on it: a server down zeroes only its own queues (their error gauge says so). ``client``
    (tests, benchmarks): read every queue through that one client instead."""

    started = time.monotonic()
    names = list(registry.declared()) if names is None else list(names)
    now = time.time() if now is None else now
    samples = {name: QueueSample() for name in names}
    memories, quarantined, batches = {}, None, None
    for server, on_server in _by_server(names, client).items():
        found: list = []
        memory, counts = scrape.read_redis(client or store.scrape_client(server), on_server, samples, now, found)
        memories[server] = memory
        quarantined = _summed(quarantined, counts)
        batches = _summed(batches, found[0] if found else None)
    database.read_dead_letters(samples)
    database.read_outbox(samples, now)
    return Snapshot(
        queues=samples,
        taken_at=now,
        read_seconds=time.monotonic() - started,
        redis_memory=memories.get(servers.DEFAULT),
        quarantined=quarantined,
        batches=batches,
        server_memory=memories,
    )


def _by_server(names, client):
    """{server name: its queues of ``names``}, the default server first and always there (its memory is read
    even with no queue on it); everything on one client when ``client`` is given."""
    if client is not None:
        return {servers.DEFAULT: names}
    found = {servers.DEFAULT: []}
    for name in names:
        found.setdefault(registry.get_config(name).server, []).append(name)
    return found


def _summed(total, counts):
    """{key: count} summed over the servers; None (unknown) only when no server answered."""
    if counts is None:
        return total
    if total is None:
        return dict(counts)
    return {key: total.get(key, 0) + counts.get(key, 0) for key in {**total, **counts}}


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
    jobs = GaugeMetricFamily(
        f"{p}_jobs",
        "Jobs per queue and state (waiting, active, delayed, paused, "
        "completed, failed), read from RQ's queue and registries.",
        labels=["queue", "state"],
    )
    duration = GaugeMetricFamily(
        f"{p}_job_duration_ms",
        "Job run time (start to end) in milliseconds, nearest-rank quantile over the last 50 completed jobs.",
        labels=["queue", "quantile"],
    )
    dead = GaugeMetricFamily(
        f"{p}_dead_letter",
        "Open dead letters (jobs that exhausted or lost their retries and wait for an operator).",
        labels=["queue"],
    )
    oldest = GaugeMetricFamily(
        f"{p}_oldest_waiting_seconds",
        "How long the job at the head of the queue has been waiting (0 when none waits or the queue is paused).",
        labels=["queue"],
    )
    workers = GaugeMetricFamily(f"{p}_workers", "Live workers listening on the queue.", labels=["queue"])
    hist = HistogramMetricFamily(
        f"{p}_job_duration_seconds",
        "Run time of every finished attempt (succeeded or failed), across all workers.",
        labels=["queue"],
    )
    waits = HistogramMetricFamily(
        f"{p}_job_wait_seconds",
        "Time an attempt waited to start: from when it "
        "became due (its enqueue, or the due time of a delayed job or a retry) to its "
        "start.",
        labels=["queue"],
    )
    totals = HistogramMetricFamily(
        f"{p}_job_total_seconds",
        "Time from a job's first enqueue to its end (finished or dead), delays, retries and their backoff included.",
        labels=["queue"],
    )
    processed = CounterMetricFamily(
        f"{p}_jobs_processed", "Attempts that ran to an end (succeeded or failed).", labels=["queue"]
    )
    failed = CounterMetricFamily(f"{p}_jobs_failed", "Attempts that raised (retried or not).", labels=["queue"])
    retried = CounterMetricFamily(f"{p}_jobs_retried", "Retries scheduled after a failed attempt.", labels=["queue"])
    dead_total = CounterMetricFamily(f"{p}_jobs_dead", "Jobs that reached the dead letter.", labels=["queue"])
    held = GaugeMetricFamily(
        f"{p}_held_jobs",
        "Jobs held back by their limit key, waiting outside the queue: over the key's limit_concurrency, beyond "
        "its limit_rate, or of a paused key.",
        labels=["queue"],
    )
    error = GaugeMetricFamily(
        f"{p}_scrape_error",
        "1 when this scrape could not read the queue's values from "
        "the source (redis or database); its values are then zeros.",
        labels=["queue", "source"],
    )
    outbox = GaugeMetricFamily(
        f"{p}_outbox",
        "Jobs accepted in a committed transaction (or durable=True) and "
        "not yet written to Redis: the outbox's rows (a relay pushes them).",
        labels=["queue"],
    )
    outbox_age = GaugeMetricFamily(
        f"{p}_outbox_oldest_age_seconds",
        "Age of the queue's oldest outbox row (0 when none): high means Redis does not take them or no relay runs.",
        labels=["queue"],
    )
    quarantined = CounterMetricFamily(
        f"{prefix}_quarantined_entries",
        "Entries read from Redis that were dropped, set aside or dead-lettered as corrupt, by kind: counted "
        "each, logged at most twice a minute per kind and key (queues/keyspace/repeats.py).",
        labels=["kind"],
    )
    batches = GaugeMetricFamily(
        f"{prefix}_batches",
        "Batches (queues.batch) by the queue of their callback ((none) without one) and state: open and running "
        "now; succeeded, completed_with_dead and canceled: batches that ended so, kept after their keys expire.",
        labels=["queue", "state"],
    )
    for (queue, state), count in (snapshot.batches or {}).items():
        batches.add_metric([queue, state], count)
    for kind, count in (snapshot.quarantined or {}).items():
        quarantined.add_metric([kind], count)
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
        hist.add_metric([name], _cumulative(s.buckets), sum_value=s.counters[store.DURATION_SUM])
        waits.add_metric([name], _cumulative(s.waits), sum_value=s.counters[store.WAIT.sum_field])
        totals.add_metric([name], _cumulative(s.totals), sum_value=s.counters[store.TOTAL.sum_field])
        processed.add_metric([name], s.counters[store.PROCESSED])
        failed.add_metric([name], s.counters[store.FAILED])
        retried.add_metric([name], s.counters[store.RETRIED])
        dead_total.add_metric([name], s.counters[store.DEAD])
    return [
        jobs,
        duration,
        dead,
        oldest,
        workers,
        hist,
        processed,
        failed,
        retried,
        dead_total,
        held,
        outbox,
        outbox_age,
        error,
        *redis_memory.families(snapshot.server_memory or {servers.DEFAULT: snapshot.redis_memory}, prefix),
        waits,
        totals,
        quarantined,
        batches,
    ]


def _cumulative(buckets):
    cumulative, running = [], 0
    for bound, count in buckets.items():
        running += count
        cumulative.append(("+Inf" if bound == float("inf") else f"{bound:g}", running))
    return cumulative


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
