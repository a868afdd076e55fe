"""Counting Redis round trips of this process (for the benchmarks in bench/)."""


class RoundTrips:
    """Counts every send to Redis of this process (one per command, one per pipeline)."""

    count = 0

    @classmethod
    def install(cls):
        import redis.connection

        original = redis.connection.AbstractConnection.send_packed_command

        def counted(self, command, check_health=True):
            cls.count += 1
            return original(self, command, check_health)

        redis.connection.AbstractConnection.send_packed_command = counted
