"""Counting Redis round trips (for the benchmarks in bench/): one per command, one per pipeline.

``RoundTrips`` counts the sends of this process. ``SharedRoundTrips`` counts the sends of every
process that installs it with the same file, and of their forked children and threads (an RQ
worker, its work horses, its scheduler and its liveness thread): each send appends one byte to
the file, with ``O_APPEND`` (atomic between processes, no lock), so the count is the file's size.
"""

import os


def _patch(on_send):
    import redis.connection

    original = redis.connection.AbstractConnection.send_packed_command

    def counted(self, command, check_health=True):
        on_send()
        return original(self, command, check_health)

    redis.connection.AbstractConnection.send_packed_command = counted


class RoundTrips:
    """Counts every send to Redis of this process (one per command, one per pipeline)."""

    count = 0

    @classmethod
    def install(cls):
        def on_send():
            cls.count += 1

        _patch(on_send)


class SharedRoundTrips:
    """Counts the sends to Redis of several processes in one file.

    In each process to count: ``SharedRoundTrips(path).install()`` (before it forks: children
    inherit the counting). In the process that reads: ``SharedRoundTrips(path).count()``.
    """

    def __init__(self, path):
        self.path = os.fspath(path)

    def install(self):
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        _patch(lambda: os.write(fd, b"."))

    def count(self):
        try:
            return os.stat(self.path).st_size
        except FileNotFoundError:
            return 0
