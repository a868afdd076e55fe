"""Where the metrics live in Redis, the scrape's own Redis client, and the pure helpers.

Two writers, one reader:

- rq itself keeps the queue (``<prefix>:queue:<q>``, a list) and its registries (sorted sets
  ``<prefix>:wip:<q>``, ``:scheduled:<q>``, ``:finished:<q>``, ``:failed:<q>``) and the worker
  sets ``<prefix>:workers:<q>``. A scrape only *reads* them.
- ``queues.metrics.recorder`` (signal receivers in the worker) writes per queue, in one pipelined
  round trip per event: the hash ``<prefix>:optima:metrics:<q>`` (counters, histogram buckets,
  duration sum; the wait and total histograms' buckets ``w:<le>``/``t:<le>`` and sums ``wait_sum``/
  ``total_sum``) and the capped list ``<prefix>:optima:metrics:<q>:durations`` (last 50 completed
  jobs, milliseconds, newest first).
"""

import functools
import math
import re

from queues import conf
from queues.connection import failover, servers
from queues.connection.clients import queues_url
from queues.connection.factory import ReconnectOnce, make_client
from queues.keyspace import keys

DURATION_SAMPLE = 50  # completed jobs the p50/p95 gauges are computed over (the record's number)
QUANTILES = (0.5, 0.95)

# Fields of the per-queue hash. Buckets are stored non-cumulative ("b:<upper bound>"), so a job
# costs one HINCRBY whatever the number of buckets; the scrape makes them cumulative.
PROCESSED, FAILED, RETRIED, DEAD, DURATION_SUM = "processed", "failed", "retried", "dead", "duration_sum"


class Histogram:
    """One histogram of the per-queue hash: its bucket-field prefix, its sum field, its setting."""

    def __init__(self, field, sum_field, setting, check_id):
        self.field, self.sum_field, self.setting, self.check_id = field, sum_field, setting, check_id

    def bounds(self):
        """Upper bounds in seconds, ascending, +Inf last."""
        return _buckets(self.setting, self.field)[0]

    def bucket_field(self, upper_bound):
        return _field(self.field, upper_bound)

    def observed(self, seconds):
        """The bucket field counting an observation of ``seconds``."""
        return _observed_field(self.setting, self.field, seconds)


# Wait: became due (enqueue, or the due time of a delayed job or retry) -> started, per attempt.
# Total: first enqueue -> finished or dead, per job; delays and backoff included.
WAIT = Histogram("w", "wait_sum", "METRICS_WAIT_BUCKETS", "queues.E054")
TOTAL = Histogram("t", "total_sum", "METRICS_TOTAL_BUCKETS", "queues.E055")

METRIC_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


counters_key = keys.metrics_key
durations_key = keys.durations_key


def bucket_field(upper_bound):
    """The hash field counting jobs whose duration fell in the bucket ending at ``upper_bound`` s."""
    return _field("b", upper_bound)


def _field(prefix, upper_bound):
    """A histogram's bucket field: ``<prefix>:<upper bound>`` (``%g``), ``<prefix>:inf`` for the last."""
    return "{}:{}".format(prefix, "inf" if math.isinf(upper_bound) else f"{float(upper_bound):g}")


def buckets():
    """The histogram's upper bounds in seconds, ascending, +Inf last."""
    return _buckets("METRICS_DURATION_BUCKETS", "b")[0]


def observed_field(seconds):
    """The duration histogram's bucket field counting a job that ran ``seconds``."""
    return _observed_field("METRICS_DURATION_BUCKETS", "b", seconds)


_bucket_cache: dict[tuple[str, str], tuple[object, tuple[float, ...], dict[float, str]]] = {}


def _buckets(setting, field):
    """(bounds, {bound: its field ``<field>:<le>``}) of the histogram set by ``setting``: sorted and formatted once per
    value of the options (``conf.options()`` is cached until a setting changes), not at each of the three
    observations of every job (issue 36)."""
    options = conf.options()
    cached = _bucket_cache.get((setting, field))
    if cached is None or cached[0] is not options:
        bounds = tuple(sorted(float(b) for b in options[setting])) + (math.inf,)
        fields = {bound: _field(field, bound) for bound in bounds}
        cached = _bucket_cache[(setting, field)] = (options, bounds, fields)
    return cached[1], cached[2]


def _observed_field(setting, field, seconds):
    bounds, fields = _buckets(setting, field)
    return fields[bucket_for(max(0.0, float(seconds)), bounds)]


def bucket_for(seconds, bounds):
    """The smallest upper bound >= ``seconds`` (Prometheus buckets are ``le``)."""
    for bound in bounds:
        if seconds <= bound:
            return bound
    return math.inf


def nearest_rank(values, q):
    """The ``q`` quantile (0 < q <= 1) of ``values`` by the nearest-rank method; 0 when empty.

    Nearest rank: sort ascending, take the value at rank ceil(q * n) (1-based). It always returns
    an observed value, which is what the record asks for (no interpolation).
    """
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return float(ordered[rank - 1])


def validate_options(options):
    """The ``conf.Problem``s of the METRICS_* options (system checks report them)."""
    where = "OPTIMA_QUEUES_OPTIONS"
    problems = []
    prefix = options.get("METRICS_PREFIX")
    if not isinstance(prefix, str) or not METRIC_NAME_RE.fullmatch(prefix):
        problems.append(
            conf.Problem(
                "queues.E050",
                f"{where}['METRICS_PREFIX'] must be a Prometheus metric name prefix "
                f"matching [a-zA-Z_:][a-zA-Z0-9_:]*, got {prefix!r}.",
                "Use letters, digits and '_', e.g. 'optima' (the default) or 'optima_stage'.",
            )
        )
    cache = options.get("METRICS_CACHE_SECONDS")
    if not _is_number(cache) or not 0 <= cache <= 60:
        problems.append(
            conf.Problem(
                "queues.E051",
                f"{where}['METRICS_CACHE_SECONDS'] must be a number of seconds between 0 and 60, got {cache!r}.",
                "5 to 10 seconds lets several scrapers share one Redis read; 0 reads on every scrape.",
            )
        )
    timeout = options.get("METRICS_REDIS_TIMEOUT")
    if not _is_number(timeout) or not 0 < timeout <= 1.5:
        problems.append(
            conf.Problem(
                "queues.E052",
                f"{where}['METRICS_REDIS_TIMEOUT'] must be a number of seconds > 0 and <= 1.5, got {timeout!r}.",
                "/metrics must answer within 2 s when Redis hangs; 0.5 (the default) leaves room.",
            )
        )
    bounds = options.get("METRICS_DURATION_BUCKETS")
    if (
        isinstance(bounds, (str, bytes))
        or not isinstance(bounds, (list, tuple))
        or not bounds
        or not all(_is_number(b) and 0 < b < math.inf for b in bounds)
        or len(set(bounds)) != len(bounds)
    ):
        problems.append(
            conf.Problem(
                "queues.E053",
                f"{where}['METRICS_DURATION_BUCKETS'] must be a non-empty list of distinct "
                f"positive numbers of seconds, got {bounds!r}.",
                "E.g. [0.1, 1, 10, 60, 600]; +Inf is added for you.",
            )
        )
    for histogram in (WAIT, TOTAL):
        bounds = options.get(histogram.setting)
        if not _bounds_ok(bounds):
            problems.append(
                conf.Problem(
                    histogram.check_id,
                    f"{where}[{histogram.setting!r}] must be a non-empty list of distinct "
                    f"positive numbers of seconds, got {bounds!r}.",
                    "E.g. [0.1, 1, 10, 60, 600, 3600]; +Inf is added for you. Remove the key for the default.",
                )
            )
    return problems


def _bounds_ok(bounds):
    return (
        not isinstance(bounds, (str, bytes))
        and isinstance(bounds, (list, tuple))
        and bool(bounds)
        and all(_is_number(b) and 0 < b < math.inf for b in bounds)
        and len(set(bounds)) == len(bounds)
    )


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def scrape_client(server=None):
    """The Redis client of scrapes (of the server named ``server``; None: the default): short timeouts, no
    retry on timeout, no health-check PING.

    Separate from the queues' client (2 s timeouts, retries) so a Redis that does not answer
    costs a scrape METRICS_REDIS_TIMEOUT per round trip at most, and every round trip is a
    pipeline the benchmark can count. A refused or dropped connection is retried once (a pooled
    connection may be stale after a Redis restart); a timeout never is.
    """

    timeout = float(conf.options()["METRICS_REDIS_TIMEOUT"])
    if server is not None and server != servers.DEFAULT:  # a server of QUEUES_REDIS_SERVERS (issue 36)
        found = servers.get(server)
        return _client(found.url, timeout, found.sentinel)
    return _client(queues_url(), timeout, failover.sentinel_config("queues"))


@functools.lru_cache(maxsize=16)
def _client(url, timeout, sentinel):

    # With sentinels: the master they name, found again after a failover.
    return make_client(url, sentinel=sentinel, timeout=timeout, retry=ReconnectOnce())
