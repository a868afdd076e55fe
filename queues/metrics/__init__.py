"""Prometheus metrics of the queues, served at ``/metrics`` with django-prometheus' own.

Every family (``optima`` is ``OPTIMA_QUEUES_OPTIONS['METRICS_PREFIX']``); labels are only
``queue``, ``state``, ``quantile``, ``source``, ``kind`` (the eight of ``keyspace/repeats.KINDS``) and the
histogram's ``le`` — never a job id. The
``optima_redis_*`` families describe the queues' Redis server and have no labels:

==========================================  =========  ================  =====================================
family                                      type       labels            from
==========================================  =========  ================  =====================================
optima_queue_jobs                           gauge      queue, state      waiting: LLEN queue (0 when paused);
                                                                         paused: LLEN queue while paused;
                                                                         active: ZCARD wip; delayed: ZCARD
                                                                         scheduled; completed/failed: ZCARD
                                                                         minus expired (ZCOUNT 0..now) of
                                                                         finished/failed
optima_queue_job_duration_ms                gauge      queue, quantile   nearest rank (0.5, 0.95) over the last
                                                                         50 completed jobs (recorder's list)
optima_queue_dead_letter                    gauge      queue             open DeadLetter rows (database)
optima_queue_oldest_waiting_seconds         gauge      queue             now - enqueued_at of the queue's head
optima_queue_workers                        gauge      queue             live keys of rq's workers:<queue> set
optima_queue_job_duration_seconds           histogram  queue             every finished attempt (recorder)
optima_queue_job_wait_seconds               histogram  queue             every started attempt: due -> start
optima_queue_job_total_seconds              histogram  queue             every ended job: first enqueue -> end
optima_queue_jobs_processed_total           counter    queue             attempts that ended (recorder)
optima_queue_jobs_failed_total              counter    queue             attempts that raised (recorder)
optima_queue_jobs_retried_total             counter    queue             retries scheduled (recorder)
optima_queue_jobs_dead_total                counter    queue             jobs dead-lettered (recorder)
optima_queue_held_jobs                      gauge      queue             ZCARD of the held sets of each of the
                                                                         queue's limit keys in use (rl-keys) and
                                                                         rate keys (rate-keys): held by a
                                                                         concurrency, a rate or a pause
optima_queue_outbox                         gauge      queue             outbox rows not yet in Redis (database)
optima_queue_outbox_oldest_age_seconds      gauge      queue             now - created_at of the oldest row
optima_queue_scrape_error                   gauge      queue, source     1: source (redis, database) unread
optima_redis_memory_used_bytes              gauge      (none)            INFO memory used_memory
optima_redis_memory_max_bytes               gauge      (none)            INFO memory maxmemory (0: no limit)
optima_redis_evicted_keys_total             counter    (none)            INFO stats evicted_keys
optima_quarantined_entries_total            counter    kind              entries dropped, set aside or buried
                                                                         corrupt, per kind (HGETALL
                                                                         <p>:optima:quarantined; kinds:
                                                                         keyspace/repeats.py KINDS)
optima_batches                              gauge      queue, state      batches by the queue of their callback
                                                                         ("(none)") and state (HGETALL
                                                                         <p>:optima:batches, kept by the batch
                                                                         scripts: queues/workflows/)
==========================================  =========  ================  =====================================

Modules: ``store`` (keys, settings, pure helpers), ``recorder`` (signal receivers, worker side),
``hook`` (the worker's hook: the recorder's tally written with the worker's pipelines), ``checks``
(queues.E050-E055),
``collector`` (the snapshot, its cache and the families above), which reads through ``scrape``
(Redis, two round trips at most), ``database`` (the dead-letter and outbox counts) and
``redis_memory`` (INFO and the ``optima_redis_*`` families) into ``snapshot``'s dataclasses;
``history`` (per-minute samples for the panel), ``views`` (the endpoint). docs/metrics.md is the
operator's version of this table.
"""

import threading

_installed = False
_lock = threading.Lock()


def install():
    """Connect the recorder and register the collector in prometheus_client's REGISTRY (once)."""
    global _installed
    # At the app's ready, not on import: a process that reads queues.metrics.store registers nothing.
    from prometheus_client import REGISTRY

    from queues.metrics import checks, recorder  # noqa: F401  (checks registers the system check)
    from queues.metrics.collector import QueueCollector

    with _lock:
        recorder.connect()
        if not _installed:
            REGISTRY.register(QueueCollector())
            _installed = True
