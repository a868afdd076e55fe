"""Testing a project that installed the queues: its own prefix per test run, and jobs run at their enqueue.

**A test run's own prefix, out of the box.** ``manage.py test`` (Django's runner, any ``TEST_RUNNER``)
and pytest with pytest-django load the app while Django sets up, before anything imports rq. Then
``isolate_test_run`` (called by queues/apps.py) switches ``settings.QUEUE_PREFIX`` to
``<QUEUE_PREFIX>-test-<10 hex digits>``, so the run's jobs, locks and metrics never meet the dev or live
queues on the same Redis, and deletes every key under that prefix when the process that chose it exits
(queue Redis and cache Redis). Nothing to configure. It leaves the prefix alone when:

- the prefix already names a test run: ``test`` is one of its dash-separated words (``test-3f2a...``,
  ``optima-test-...``): a suite that picks its own, as this repository's tests/session_env.py does;
- the process is a child of a test run (a worker a test starts): it inherits the run's prefix through the
  environment variable ``QUEUES_TEST_PREFIX`` and leaves the clean-up to its parent;
- rq was imported before the app loaded: its key prefix is fixed by then (check queues.E006).

**Inline mode**, for unit tests (as Django's ``ImmediateBackend`` does for Tasks)::

    from queues.testing import inline

    with inline():          # or @inline() on a test function
        job = queues.enqueue("orders-sync", sync_orders, 42)   # sync_orders(42) has run, here and now

Inside ``inline()`` an enqueue (``enqueue``, ``enqueue_call``, ``enqueue_many``, a ``@task``'s ``enqueue``)
is validated as ever (``InvalidJob``), then runs the job in the caller's thread instead of writing it to
Redis: nothing reaches Redis, no worker is needed. ``delay=``/``at=`` run at once; ``unique=`` and the limit
options are not applied; an exception of the job propagates to the enqueue's caller (no retry, no dead
letter), so a test sees it. ``queues.current_job()`` answers inside the job (attempt 1; ``set_progress``
keeps the progress in the job's meta, in memory). The returned job's ``get_status()`` is ``finished`` and
``inline_result(job)`` its return value. Process-wide: a thread the test starts runs its jobs inline too.
"""

import atexit
import contextlib
import os
import secrets
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from django.conf import settings

from queues import conf

PREFIX_ENV = "QUEUES_TEST_PREFIX"  # a test run's prefix, for its child processes


# -- a test run's own prefix ----------------------------------------------------------------------
def is_test_run(argv: Sequence[str] | None = None, modules: Mapping[str, object] | None = None) -> bool:
    """True in ``manage.py test`` / ``django-admin test`` and under pytest-django."""
    argv = sys.argv if argv is None else argv
    modules = sys.modules if modules is None else modules
    return (len(argv) > 1 and argv[1] == "test") or "pytest_django" in modules


def names_a_test_run(prefix: str) -> bool:
    """True for a prefix a test run chose (``test`` one of its dash-separated words)."""
    return "test" in prefix.split("-")


def isolate_test_run() -> str | None:
    """Give this test run a prefix of its own (the module docstring); -> the prefix chosen or inherited,
    or None when the prefix is left as configured."""
    inherited = os.environ.get(PREFIX_ENV)
    if inherited and "rq" not in sys.modules:
        settings.QUEUE_PREFIX = inherited
        return inherited
    base = conf.prefix()
    if not is_test_run() or "rq" in sys.modules or not isinstance(base, str) or names_a_test_run(base):
        return None
    chosen = f"{base[:47]}-test-{secrets.token_hex(5)}"  # 64 characters at most (queues.E001)
    settings.QUEUE_PREFIX = chosen
    os.environ[PREFIX_ENV] = chosen
    atexit.register(remove_prefix, chosen, os.getpid())
    return chosen


def remove_prefix(prefix: str, owner_pid: int | None = None) -> int:
    """Delete every key under ``prefix:`` in the queue Redis and the cache Redis (at the test run's exit;
    not in a process forked from it). -> keys deleted."""
    if owner_pid is not None and os.getpid() != owner_pid:
        return 0
    from queues.connection.clients import get_cache_connection, get_connection  # at exit: settings are loaded

    deleted = 0
    try:
        clients = [get_connection(), get_cache_connection()]
        seen = set()
        for client in clients:
            kwargs = client.connection_pool.connection_kwargs
            where = (kwargs.get("host"), kwargs.get("port"), kwargs.get("path"), kwargs.get("db"))
            if where in seen:
                continue
            seen.add(where)
            batch = []
            for key in client.scan_iter(match=f"{prefix}:*", count=1000):
                batch.append(key)
                if len(batch) == 500:
                    deleted += client.delete(*batch)
                    batch = []
            if batch:
                deleted += client.delete(*batch)
    except Exception as exc:  # noqa: BLE001 — at exit: say so, never hide the run's own outcome
        print(f"queues: could not delete the test run's keys {prefix}:* ({type(exc).__name__}: {exc})", file=sys.stderr)
    return deleted


# -- inline mode ----------------------------------------------------------------------------------
_inline_lock = threading.Lock()
_inline_depth = 0


@contextlib.contextmanager
def inline() -> Iterator[None]:
    """Run every job at its enqueue while inside (a context manager, or a decorator of a test function)."""
    global _inline_depth
    with _inline_lock:
        _inline_depth += 1
    try:
        yield
    finally:
        with _inline_lock:
            _inline_depth -= 1


def inline_on() -> bool:
    return _inline_depth > 0


def inline_result(job: Any) -> Any:
    """The return value of a job run by ``inline()``."""
    from queues import rqcompat  # imports rq: this module is read before rq may be (isolate_test_run)

    return rqcompat.cached_result(job)


__all__ = ["inline", "inline_result", "isolate_test_run", "remove_prefix", "PREFIX_ENV"]
