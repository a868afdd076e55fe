"""Counting a panel page's Redis round trips (issue 33: at most 5 per page whatever its size)."""

import pytest
import redis.connection


@pytest.fixture(name="round_trips")
def round_trips_fixture(monkeypatch):
    """Counts the sends to Redis (one per command, one per pipeline) during ``get``; not a new connection's
    handshake (redis-py's HELLO and CLIENT SETINFO, once per connection: the panel opens one per request)."""
    original = redis.connection.AbstractConnection.send_packed_command
    state = {"on": False, "count": 0, "sent": []}

    def counted(self, command, check_health=True):
        if state["on"]:
            state["count"] += 1
            raw = bytes(command if isinstance(command, bytes) else b"".join(command))
            state["sent"].append(raw.split(b"\r\n")[2])  # the (first) command's name
        return original(self, command, check_health)

    original_connect = redis.connection.AbstractConnection.on_connect_check_health

    def handshake(self, *args, **kwargs):
        # redis-py's handshake of a new connection (HELLO/AUTH, CLIENT SETINFO): the connection's, not the page's.
        on, state["on"] = state["on"], False
        try:
            return original_connect(self, *args, **kwargs)
        finally:
            state["on"] = on

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)
    monkeypatch.setattr(redis.connection.AbstractConnection, "on_connect_check_health", handshake)

    class Counter:
        def get(self, client, path):
            state.update(on=True, count=0, sent=[])
            try:
                return client.get(path)
            finally:
                state["on"] = False

        @property
        def sent(self):
            return state["sent"]

        @property
        def count(self):
            return state["count"]

    return Counter()
