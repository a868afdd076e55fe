"""What Redis runs, watched on the wire (MONITOR): the commands a test proves a write by, in the order Redis
applied them."""

import contextlib
import threading

import redis

END = "end-of-watch"


@contextlib.contextmanager
def watched(connection, keep):
    """The commands Redis runs while the block runs and ``keep(command)`` accepts (MONITOR's text form, the
    arguments joined by spaces), in the order it ran them: a list filled by a thread, complete once the block
    ended. ``connection``: a client of that Redis (the watch holds a connection of a pool of its own, without a read
    timeout: redis-py's default of 5 s ended the watch when a worker process, starting on a loaded machine, sent
    nothing for that long)."""
    seen, ready = [], threading.Event()
    kwargs = dict(connection.connection_pool.connection_kwargs, socket_timeout=None)
    watcher = redis.Redis(
        connection_pool=redis.ConnectionPool(connection_class=connection.connection_pool.connection_class, **kwargs)
    )

    def watch():
        with watcher.monitor() as monitor:
            ready.set()
            while True:
                command = monitor.next_command()["command"]
                if command == f"ECHO {END}":
                    return
                if keep(command):
                    seen.append(command)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    assert ready.wait(10), "MONITOR did not start"
    try:
        yield seen
    finally:
        connection.echo(END)  # on another connection: the watch's last command
        thread.join(30)
        watcher.close()
