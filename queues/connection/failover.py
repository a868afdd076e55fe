"""Redis failover settings: Sentinel for the queues' and the cache's Redis, and WAIT for replicas.

One Redis is one machine. With Sentinel, clients ask the sentinels where the master is and ask
again whenever a connection to it fails, so a promoted replica takes over without restarting the
web, the workers or the schedulers (``queues.connection.clients`` builds every client that way).

Replication is asynchronous: an enqueue acknowledged by the master can be lost when the master dies
before its replica got the write. ``QUEUES_REDIS_WAIT_REPLICAS`` > 0 makes every enqueue wait
(``WAIT``) for that many replicas, at most ``QUEUES_REDIS_WAIT_TIMEOUT_MS`` (queues/connection/replication.py).

The settings come from the environment in optima_site/settings.py, as given (strings); this module
parses them. The same validators raise at first use (``ImproperlyConfigured``) and report in the
system checks (queues.E040-E043), so the messages match. Sentinel settings:

=====================================  ==============================  ============================
setting                                environment                     meaning
=====================================  ==============================  ============================
``QUEUES_REDIS_SENTINELS``             ``REDIS_SENTINELS``             ``host:port,host:port,...``
``QUEUES_REDIS_SENTINEL_MASTER``       ``REDIS_SENTINEL_MASTER``       the master's name
``CACHE_REDIS_SENTINELS``              ``CACHE_REDIS_SENTINELS``       as above, for the cache
``CACHE_REDIS_SENTINEL_MASTER``        ``CACHE_REDIS_SENTINEL_MASTER``
``QUEUES_REDIS_WAIT_REPLICAS``         ``REDIS_WAIT_REPLICAS``         replicas, default 0 (off)
``QUEUES_REDIS_WAIT_TIMEOUT_MS``       ``REDIS_WAIT_TIMEOUT_MS``       milliseconds, default 1000
=====================================  ==============================  ============================
"""

import functools
import re
from dataclasses import dataclass

from django.conf import settings

from queues.conf import Problem, raise_first_error

# setting name -> the environment variable it is read from (messages name the variable operators set).
ENV = {
    "QUEUES_REDIS_SENTINELS": "REDIS_SENTINELS",
    "QUEUES_REDIS_SENTINEL_MASTER": "REDIS_SENTINEL_MASTER",
    "CACHE_REDIS_SENTINELS": "CACHE_REDIS_SENTINELS",
    "CACHE_REDIS_SENTINEL_MASTER": "CACHE_REDIS_SENTINEL_MASTER",
    "QUEUES_REDIS_WAIT_REPLICAS": "REDIS_WAIT_REPLICAS",
    "QUEUES_REDIS_WAIT_TIMEOUT_MS": "REDIS_WAIT_TIMEOUT_MS",
}
WAIT_TIMEOUT_MS_DEFAULT = 1000  # an enqueue waits at most this long for its replicas
_MASTER_NAME = re.compile(r"[A-Za-z0-9._-]{1,200}")
_HOST_PORT = re.compile(r"^(?:\[(?P<ip6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9._-]+)):(?P<port>[0-9]{1,5})$")


@dataclass(frozen=True)
class SentinelConfig:
    """Where the sentinels are and which master they watch."""

    sentinels: tuple  # ((host, port), ...)
    master: str


def _name(setting):
    return f"{ENV[setting]} (setting {setting})" if setting in ENV else setting


def valid_master_name(master):
    """Whether ``master`` can be a Sentinel master's name (letters, digits, '.', '_', '-')."""
    return bool(_MASTER_NAME.fullmatch(str(master)))


def parse_sentinels(value, setting="QUEUES_REDIS_SENTINELS"):
    """``'h1:26379,h2:26379'`` (or a list of such strings or of (host, port) pairs) -> ((host, port), ...).

    Raises ValueError naming the variable, the bad entry and the expected form."""
    if value is None or value == "":
        return ()
    items = [v.strip() for v in value.split(",")] if isinstance(value, str) else list(value)
    result = []
    for item in items:
        if isinstance(item, (tuple, list)) and len(item) == 2:
            item = f"{item[0]}:{item[1]}"
        match = _HOST_PORT.match(item) if isinstance(item, str) else None
        port = int(match["port"]) if match else 0
        if not match or not 1 <= port <= 65535:
            raise ValueError(
                f"{_name(setting)} has {item!r}, expected host:port with a port from 1 to 65535 "
                f"(e.g. 10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379)."
            )
        result.append((match["ip6"] or match["host"], port))
    return tuple(result)


def _problems_of_sentinels(kind):
    prefix = "QUEUES" if kind == "queues" else "CACHE"
    s_setting, m_setting = f"{prefix}_REDIS_SENTINELS", f"{prefix}_REDIS_SENTINEL_MASTER"
    raw = getattr(settings, s_setting, "")
    master = getattr(settings, m_setting, "") or ""
    try:
        sentinels = parse_sentinels(raw, s_setting)
    except ValueError as exc:
        return [
            Problem(
                "queues.E040",
                str(exc),
                f"List the sentinels as host:port, comma-separated, in "
                f"{ENV[s_setting]}; unset it to connect to the URL directly.",
            )
        ], None
    if sentinels and not master:
        return [
            Problem(
                "queues.E041",
                f"{_name(s_setting)} is set but {_name(m_setting)} is not.",
                f"Set {ENV[m_setting]} to the master name the sentinels monitor (the name in "
                f"'sentinel monitor <name> ...'), or unset {ENV[s_setting]}.",
            )
        ], None
    if master and not sentinels:
        return [
            Problem(
                "queues.E041",
                f"{_name(m_setting)} is {master!r} but {_name(s_setting)} is not set.",
                f"Set {ENV[s_setting]} to the sentinels' host:port list, or unset {ENV[m_setting]}.",
            )
        ], None
    if master and not _MASTER_NAME.fullmatch(str(master)):
        return [
            Problem(
                "queues.E041",
                f"{_name(m_setting)} is {master!r}, not a Sentinel master name.",
                "Letters, digits, '.', '_' and '-' only: the name in 'sentinel monitor <name> ...'.",
            )
        ], None
    return [], (SentinelConfig(sentinels, str(master)) if sentinels else None)


@functools.lru_cache(maxsize=2)
def sentinel_config(kind):
    """The SentinelConfig of ``kind`` ('queues' or 'cache'), or None when it connects to its URL directly.
    A bad configuration raises ImproperlyConfigured with the system check's message. Cached: every
    ``get_connection()`` reads it."""
    problems, config = _problems_of_sentinels(kind)
    raise_first_error(problems, see_check=False)
    return config


def _as_int(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9]+\s*", value):
        return int(value)
    return None


def _problems_of_wait():
    replicas_raw = getattr(settings, "QUEUES_REDIS_WAIT_REPLICAS", 0)
    timeout_raw = getattr(settings, "QUEUES_REDIS_WAIT_TIMEOUT_MS", WAIT_TIMEOUT_MS_DEFAULT)
    replicas, timeout = _as_int(replicas_raw), _as_int(timeout_raw)
    problems = []
    if replicas is None or replicas < 0:
        problems.append(
            Problem(
                "queues.E042",
                f"{_name('QUEUES_REDIS_WAIT_REPLICAS')} is {replicas_raw!r}, expected an integer >= 0.",
                "0 (the default) does not wait; 1 makes every enqueue wait for one replica (docs/operations.md"
                "#redis-failover).",
            )
        )
    if timeout is None or timeout < 1:
        problems.append(
            Problem(
                "queues.E043",
                f"{_name('QUEUES_REDIS_WAIT_TIMEOUT_MS')} is {timeout_raw!r}, expected an integer "
                "number of milliseconds >= 1.",
                f"Remove it for the default ({WAIT_TIMEOUT_MS_DEFAULT} ms). 0 is refused: WAIT 0 blocks forever.",
            )
        )
    return problems, (replicas, timeout)


def wait_replicas():
    """(replicas, timeout in ms) every enqueue waits for; replicas 0: no wait. Raises ImproperlyConfigured
    with the check's message when either is bad. Cached: it is read on every enqueue."""
    return _wait_cached()


@functools.lru_cache(maxsize=1)
def _wait_cached():
    problems, value = _problems_of_wait()
    raise_first_error(problems, see_check=False)
    return value


def validate():
    """Problems of the failover settings: queues.E040 - E043."""
    problems = _problems_of_sentinels("queues")[0]
    inherited = all(
        getattr(settings, f"CACHE_REDIS_{k}", "") == getattr(settings, f"QUEUES_REDIS_{k}", "")
        for k in ("SENTINELS", "SENTINEL_MASTER")
    )
    if not inherited:  # the cache's own sentinels; inherited ones are reported once, under the queues' names
        problems += _problems_of_sentinels("cache")[0]
    return problems + _problems_of_wait()[0]


def clear_caches():
    """Forget the parsed settings (called on Django's ``setting_changed`` by queues.connection.clients)."""
    _wait_cached.cache_clear()
    sentinel_config.cache_clear()
