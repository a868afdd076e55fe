"""What Redis runs, watched on the wire (MONITOR): the commands a test proves a write by, in the order Redis
applied them."""

import contextlib
import threading

END = "end-of-watch"


@contextlib.contextmanager
def watched(connection, keep):
    """The commands Redis runs while the block runs and ``keep(command)`` accepts (MONITOR's text form, the
    arguments joined by spaces), in the order it ran them: a list filled by a thread, complete once the block
    ended. ``connection``: a client of that Redis (the watch holds a connection of its pool)."""
    seen, ready = [], threading.Event()

    def watch():
        with connection.monitor() as monitor:
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
        connection.echo(END)  # on another connection of the pool: the watch's last command
        thread.join(30)
