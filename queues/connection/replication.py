"""Waiting for replicas after an enqueue (``REDIS_WAIT_REPLICAS``; docs/operations.md#redis-failover).

Redis replicates asynchronously: the master answers a write before any replica has it. If the
master dies in that window and Sentinel promotes a replica, the write never happened — an enqueue
the caller saw succeed is lost. ``WAIT n timeout`` closes the window: it returns once ``n``
replicas have acknowledged every earlier write *of the calling connection*, or when the timeout
passes, with the number that did.

``acknowledged(queue)`` wraps the Redis write of every enqueue (``writing.write_job``). With
``QUEUES_REDIS_WAIT_REPLICAS`` = 0 (the default) it yields the queue untouched: no cost at all.
Above 0 it yields a copy of the queue bound to a client that has exactly one connection (its own
pool that always hands out that connection; one per thread and source pool, kept), so that the
enqueue's commands — plain ones, pipelines and WATCH/MULTI transactions alike — all run on the
connection that then sends ``WAIT``. (A single-connection ``redis.Redis`` would not do: its pipelines
take another connection from the pool.) ``WAIT`` is sent after the transaction, never inside MULTI,
where it does not block.

Fewer replicas than asked within the timeout raises ``NotReplicated``, a ``QueueUnavailable``: the
job *is* written on the master and will run unless a failover comes first, but the caller was
promised an acknowledgement that would survive one, and it did not get it. Raising keeps that
promise honest: a caller that treats ``QueueUnavailable`` as "not enqueued, try again" (the API
answers 503, the outbox keeps its row and relays it again) then at worst runs the job twice, which
at-least-once delivery allows (jobs are idempotent); returning normally would silently turn "waited
for a replica" back into "may be lost". Callers that prefer to go on can catch ``NotReplicated``.
"""

import contextlib
import copy
import os
import threading
import weakref

from redis.sentinel import SentinelConnectionPool

from queues.connection import failover
from queues.exceptions import NotReplicated
from queues.keyspace import keys

_local = threading.local()


class _OneConnection:
    """Pool behaviour: every ``get_connection`` hands out the same connection, also while it is in use
    (rq reads INFO through the queue's client while the WATCH of a unique enqueue holds the
    connection: a pool of size one would refuse that). Safe because a pinned client belongs to one
    thread, whose commands follow each other."""

    _pinned = None
    _pinned_pid = None

    def get_connection(self, *args, **kwargs):
        if self._pinned is None or self._pinned_pid != os.getpid():
            self._pinned = super().get_connection(*args, **kwargs)
            self._pinned_pid = os.getpid()
        else:
            # As a pool does at each checkout: a connection dropped by the last command reconnects here,
            # where a Sentinel-managed one asks the sentinels for the master again (a reconnect deeper
            # down, when a command is sent, would go back to the address it had).
            self._pinned.connect()
        return self._pinned

    def release(self, connection):
        """Kept: the connection stays this pool's one connection."""

    def reset(self):
        super().reset()
        self._pinned = None


_pool_classes: dict[type, type] = {}


def _single_connection_pool(pool, wait_seconds):
    """A pool of one connection to the same server as ``pool`` (Sentinel-managed when it is), whose
    socket timeout is longer by ``wait_seconds``: a WAIT blocks that long before it answers, and a
    socket timeout first would drop the connection and report an outage instead of NotReplicated."""
    base = type(pool)
    cls = _pool_classes.get(base)
    if cls is None:
        cls = _pool_classes[base] = type(f"OneConnection{base.__name__}", (_OneConnection, base), {})
    kwargs = dict(pool.connection_kwargs)
    if kwargs.get("socket_timeout"):
        kwargs["socket_timeout"] += wait_seconds
    if isinstance(pool, SentinelConnectionPool):
        kwargs.pop("connection_pool", None)  # the source pool's proxy; the new pool makes its own
        return cls(pool.service_name, pool.sentinel_manager, connection_class=pool.connection_class, **kwargs)
    return cls(connection_class=pool.connection_class, **kwargs)


def pinned_client(client, wait_seconds=0.0):
    """A client like ``client`` whose every command, pipelines included, uses one and the same
    connection, with ``wait_seconds`` more socket timeout. One per thread and source pool, reused (a
    connection per enqueue would cost a connect; a settings change makes a new source pool)."""
    pinned = getattr(_local, "clients", None)
    if pinned is None:
        pinned = _local.clients = weakref.WeakKeyDictionary()
    source = client.connection_pool
    found = pinned.get(source)
    if found is None:
        found = pinned[source] = type(client)(connection_pool=_single_connection_pool(source, wait_seconds))
        for attr in ("_optima_url", "_optima_sentinel"):
            if hasattr(client, attr):
                setattr(found, attr, getattr(client, attr))
    return found


def wait_for_replicas(client, replicas, timeout_ms):
    """``WAIT`` on ``client``'s one connection; raises NotReplicated when fewer than ``replicas`` acknowledged."""
    got = client.execute_command("WAIT", replicas, timeout_ms)
    if got < replicas:
        raise NotReplicated(
            f"The job was written to the queues' Redis master, but only {got} of the {replicas} replica(s) "
            f"REDIS_WAIT_REPLICAS asks for acknowledged it within REDIS_WAIT_TIMEOUT_MS={timeout_ms} ms: a "
            "failover now could lose it. It is not acknowledged: enqueue again if it must not be lost (a "
            "duplicate runs at worst), and check the replicas (INFO replication).",
            acknowledged=got,
            wanted=replicas,
        )
    return got


@contextlib.contextmanager
def acknowledged(queue):
    """Yield the queue to write the job with; then, when ``REDIS_WAIT_REPLICAS`` > 0, wait for the replicas."""
    replicas, timeout_ms = failover.wait_replicas()
    if replicas == 0:
        yield queue
        return
    client = pinned_client(queue.connection, timeout_ms / 1000)
    bound = copy.copy(queue)
    bound.connection = client
    yield bound
    wait_for_replicas(client, replicas, timeout_ms)


def confirm(queue):
    """For a job found already written (the outbox's re-push after a ``NotReplicated``): make sure the
    replicas have it before it counts as acknowledged. WAIT counts only the writes of its own
    connection, so this connection writes first (a probe key of this app, expiring in a minute),
    then WAITs: a replica that has the probe has everything the master wrote before it, the job
    included. Raises ``NotReplicated``; a no-op when ``REDIS_WAIT_REPLICAS`` is 0."""
    replicas, timeout_ms = failover.wait_replicas()
    if replicas == 0:
        return
    client = pinned_client(queue.connection, timeout_ms / 1000)
    client.set(keys.replication_probe_key(), os.getpid(), ex=60)
    wait_for_replicas(client, replicas, timeout_ms)
