"""Several Redis servers for the queues (issue 36): ``QUEUES_REDIS_SERVERS`` and a queue's ``"redis"`` option.

One Redis is one machine's memory and one core. When it is full, a team adds a server instead of a bigger
one: ``QUEUES_REDIS_SERVERS = {"orders": "redis://10.0.0.7:6379/0"}`` names it, and a queue declared with
``{"redis": "orders"}`` lives there — its jobs, its registries, its workers. A queue without the option lives
on the default server, ``QUEUES_REDIS_URL`` (with ``QUEUES_REDIS_SENTINELS``), named ``"default"``: what
every queue did before, so a project with one server changes nothing.

Each server takes the URL forms ``QUEUES_REDIS_URL`` takes (``redis://``, ``rediss://`` with its ``ssl_*``
options, an ACL user and password), or a dict for Sentinel: ``{"URL": url, "SENTINELS":
"h1:26379,h2:26379", "SENTINEL_MASTER": "orders"}`` (the URL then gives the user, password, db and TLS, as
``REDIS_URL`` does with ``REDIS_SENTINELS``). Every server holds its keys under the same ``QUEUE_PREFIX``.
The environment variable ``REDIS_SERVERS`` gives the setting as a JSON object (optima_site/settings.py).

The same validator reports in the system checks (queues.E130 - E132) and refuses the first use of a server
(``ImproperlyConfigured``), so the messages match. This module knows the server names and where they are;
``queues.connection.clients`` builds their clients and ``queues.connection.djangorq`` django-rq's view.
"""

import difflib
import functools
import json
from dataclasses import dataclass

import redis
from django.conf import settings

from queues import conf
from queues.catalog import queues as declarations
from queues.conf import Problem, raise_first_error
from queues.connection import failover
from queues.connection.factory import mask_url

SETTING = "QUEUES_REDIS_SERVERS"
DEFAULT = conf.DEFAULT_SERVER
ENTRY_KEYS = ("URL", "SENTINELS", "SENTINEL_MASTER")
_FIX = "docs/settings.md#several-redis-servers"


@dataclass(frozen=True)
class Server:
    """One Redis server of the queues: its name, URL and the sentinels that find its master (or None)."""

    name: str
    url: str
    sentinel: failover.SentinelConfig | None = None


def default_url():
    """The default server's URL: ``QUEUES_REDIS_URL`` (``REDIS_URL``)."""
    return getattr(settings, "QUEUES_REDIS_URL", "redis://127.0.0.1:6379/0")


def _raw():
    """The setting as given: a dict, or its JSON text (the environment's ``REDIS_SERVERS``); "" or None: none."""
    raw = getattr(settings, SETTING, None)
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw  # not JSON: reported as not a dict, with the text
    return raw


def _bad(msg, hint):
    return Problem("queues.E131", msg, hint)


def _url_problem(where, url):
    if not isinstance(url, str):
        return _bad(
            f"{where} must be a Redis URL, got {type(url).__name__} {url!r}.",
            "e.g. 'redis://10.0.0.7:6379/0', 'rediss://user:password@redis-orders:6380/0', or a dict with "
            f"'URL', 'SENTINELS' and 'SENTINEL_MASTER' for Sentinel ({_FIX}).",
        )
    try:
        if not url.startswith(("redis://", "rediss://")):
            raise ValueError("the scheme must be redis:// or rediss://")
        redis.connection.parse_url(url)
    except ValueError as exc:
        shown = mask_url(url)  # a message never shows a password
        return _bad(
            f"{where} is {shown!r}, not a Redis URL: {exc}",
            f"redis://[user:password@]host:port/db, or rediss://... for TLS, as REDIS_URL ({_FIX}).",
        )
    return None


def _entry(name, value):
    """(problems, Server or None) of one ``QUEUES_REDIS_SERVERS`` entry."""
    where = f"{SETTING}[{name!r}]"
    if not isinstance(name, str) or not conf.SERVER_NAME_RE.fullmatch(name):
        return [
            _bad(
                f"{SETTING} names a server {name!r}, which is not a valid server name.",
                "Server names match [a-z0-9][a-z0-9_-]{0,63}: lower-case letters, digits, '-' and '_' (e.g. 'orders').",
            )
        ], None
    if name == DEFAULT:
        return [
            Problem(
                "queues.E132",
                f"{SETTING} names a server {DEFAULT!r}: that name is the default server's, "
                "QUEUES_REDIS_URL (REDIS_URL).",
                f"Give the server another name (e.g. 'orders'), or set REDIS_URL for the default server and remove "
                f"{DEFAULT!r} from {SETTING} ({_FIX}).",
            )
        ], None
    if not isinstance(value, dict):
        problem = _url_problem(where, value)
        return ([problem], None) if problem else ([], Server(name, value))
    unknown = sorted(str(k) for k in value if k not in ENTRY_KEYS)
    if unknown:
        return [
            _bad(
                f"{where} has unknown keys {', '.join(map(repr, unknown))}.",
                f"A server is a URL, or a dict of {', '.join(ENTRY_KEYS)} for Sentinel ({_FIX}).",
            )
        ], None
    problem = _url_problem(f"{where}['URL']", value.get("URL"))
    if problem:
        return [problem], None
    try:
        sentinels = failover.parse_sentinels(value.get("SENTINELS"), f"{where}['SENTINELS']")
    except ValueError as exc:
        return [_bad(str(exc), "List the sentinels as host:port, comma-separated, or give the URL alone.")], None
    master = value.get("SENTINEL_MASTER") or ""
    if bool(sentinels) != bool(master) or (master and not failover.valid_master_name(master)):
        return [
            _bad(
                f"{where} has SENTINELS {value.get('SENTINELS')!r} and SENTINEL_MASTER {master!r}: Sentinel needs "
                "both, the master a name of letters, digits, '.', '_' and '-'.",
                "Give both (the master as in 'sentinel monitor <name> ...'), or neither to connect to the URL "
                "directly.",
            )
        ], None
    sentinel = failover.SentinelConfig(sentinels, str(master)) if sentinels else None
    return [], Server(name, value["URL"], sentinel)


def _parse():
    """(problems, {name: Server}) of ``QUEUES_REDIS_SERVERS``, the default server not included."""
    raw = _raw()
    if not isinstance(raw, dict):
        return [
            _bad(
                f"{SETTING} must be a dict of server name -> Redis URL, got {type(raw).__name__} {raw!r}.",
                'e.g. {"orders": "redis://10.0.0.7:6379/0"}; from the environment, REDIS_SERVERS as a JSON object '
                f"({_FIX}).",
            )
        ], {}
    problems, found = [], {}
    for name, value in raw.items():
        entry_problems, server = _entry(name, value)
        problems += entry_problems
        if server is not None:
            found[name] = server
    return problems, found


def _unknown_servers(names):
    """E130 for every queue declaration whose ``"redis"`` option names no server."""
    problems = []
    for where, decl in declarations.sources():
        for queue, options in decl.items():
            server = options.get(conf.QUEUE_SERVER_OPTION) if isinstance(options, dict) else None
            if isinstance(server, str) and conf.SERVER_NAME_RE.fullmatch(server) and server not in names:
                known = ", ".join(repr(n) for n in sorted(names))
                close = difflib.get_close_matches(server, sorted(names), n=1)
                did_you_mean = f"Did you mean {close[0]!r}? " if close else ""
                problems.append(
                    Problem(
                        "queues.E130",
                        f"{where}[{queue!r}]['redis'] names the Redis server {server!r}, which {SETTING} does not "
                        "declare.",
                        f"{did_you_mean}The servers: {known}. Add {server!r} to {SETTING} or fix the name ({_FIX}).",
                    )
                )
    return problems


def validate():
    """Problems of ``QUEUES_REDIS_SERVERS`` (E131, E132) and of the queues' ``"redis"`` options (E130)."""
    problems, found = _parse()
    return problems + _unknown_servers({DEFAULT, *found, *_named_anyway()})


def _named_anyway():
    """The server names an entry declares even when its value is bad: a queue naming it is not reported
    twice (E131 says what is wrong with the server)."""
    raw = _raw()
    return {n for n in raw if isinstance(n, str)} if isinstance(raw, dict) else set()


@functools.lru_cache(maxsize=1)
def servers():
    """{name: Server} of every server, the default first. Refuses a bad configuration with the check's
    message (ImproperlyConfigured). Cached: every client lookup reads it."""
    problems, found = _parse()
    raise_first_error(problems)
    default = Server(DEFAULT, default_url(), failover.sentinel_config("queues"))
    return {DEFAULT: default, **dict(sorted(found.items()))}


def names():
    """Every server's name, the default first."""
    return list(servers())


def get(name=None):
    """The Server named ``name`` (None: the default). An unknown name is refused, naming the servers."""
    name = DEFAULT if name is None else name
    try:
        return servers()[name]
    except KeyError:
        raise ValueError(
            f"No Redis server {name!r}: the servers are {', '.join(map(repr, servers()))} ({SETTING})."
        ) from None


def of_queue(queue_name):
    """The name of the server the declared queue ``queue_name`` lives on (UnknownQueue when undeclared)."""
    server = declarations.get_config(queue_name).server
    if server not in servers():
        raise_first_error(_unknown_servers(set(servers())))  # E130's words: the declaration and the fix
    return server


def for_worker(names, server=None):
    """The queue names a worker serves: ``names`` (default: every declared queue of ``server``, or of the
    default server when ``server`` is None too), all of them on one Redis server. -> (names, server name).

    A worker's connection is its queues' server: queues of two servers, or a name not on ``server``, are
    refused (ValueError) naming each queue's server and the fix. With no names and no ``server`` while several
    servers exist, the default server's queues (the others' need ``--server NAME``: ``left_out`` says which)."""
    if server is not None and server not in servers():
        raise ValueError(
            f"--server {server!r} names no Redis server: the servers are {', '.join(map(repr, servers()))} ({SETTING})."
        )
    names = list(names) or declarations.on_server(server or DEFAULT)
    if not names:
        raise ValueError(
            f'No declared queue lives on the Redis server {server!r}: give a queue\'s "redis" option '
            f"{server!r} to serve it, or start the worker with another --server."
        )
    by_server = {}
    for name in names:
        by_server.setdefault(of_queue(name), []).append(name)
    if server is not None and set(by_server) != {server}:
        others = {s: q for s, q in by_server.items() if s != server}
        raise ValueError(
            f"--server {server!r} was given queues of other Redis servers: {_listed(others)}. A worker serves "
            f"the queues of one server: drop those names, or start another worker with their --server."
        )
    if len(by_server) > 1:
        raise ValueError(
            f"The queues given live on {len(by_server)} Redis servers: {_listed(by_server)}. A worker serves the "
            "queues of one server (its connection is theirs): start one worker per server, e.g. "
            + " and ".join(f"'rqworker --server {s}'" for s in by_server)
            + f" ({_FIX})."
        )
    return names, next(iter(by_server))


def left_out(server):
    """The servers whose queues a worker of ``server`` started without queue names does not serve."""
    return [name for name in servers() if name != server and declarations.on_server(name)]


def _listed(by_server):
    return "; ".join(f"{server!r} ({', '.join(names)})" for server, names in by_server.items())


def several():
    """Whether more than the default server is configured (one-server projects skip the per-server work)."""
    return len(servers()) > 1


def clear_caches():
    """Forget the parsed setting (called on Django's ``setting_changed`` by queues.connection.clients)."""
    servers.cache_clear()
