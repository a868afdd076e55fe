"""What every benchmark job does, the same in every system (standard library only).

A job gets the time it was enqueued (``time.time()`` in the producer) as its only argument and
appends one 24-byte record ``(enqueued, started, ended)`` to ``$BENCH_RECORD_DIR/<pid>.bin``: the
bench counts finished jobs from the files' sizes and reads pick-up latency (started - enqueued)
and throughput (the ends) from them. ``os.write`` on an ``O_APPEND`` file is atomic for a record
this small, so threads and forked work horses share nothing but the kernel's file.

Workload B's jobs first fetch ``$BENCH_HTTP_URL`` (the bench's server, answering after 100 ms):
``io_call`` over one keep-alive ``http.client`` connection per thread, ``aio_call`` over a small
pool of keep-alive asyncio connections per event loop.
"""

import asyncio
import os
import struct
import threading
import time
from http.client import HTTPConnection
from urllib.parse import urlsplit

RECORD = struct.Struct("ddd")
_files = {}  # pid -> fd (a forked work horse opens its own)
_local = threading.local()


def record(enqueued, started):
    pid = os.getpid()
    fd = _files.get(pid)
    if fd is None:
        path = os.path.join(os.environ["BENCH_RECORD_DIR"], f"{pid}.bin")
        fd = _files[pid] = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(fd, RECORD.pack(enqueued, started, time.time()))


def _target():
    url = urlsplit(os.environ["BENCH_HTTP_URL"])
    return url.hostname, url.port, url.path or "/"


def io_call():
    """GET the bench's server (100 ms) on this thread's keep-alive connection."""
    conn = getattr(_local, "conn", None)
    host, port, path = _target()
    for attempt in (1, 2):
        if conn is None:
            conn = _local.conn = HTTPConnection(host, port, timeout=30)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"the bench's HTTP server answered {response.status}")
            return
        except (ConnectionError, OSError):
            conn.close()
            conn = _local.conn = None
            if attempt == 2:
                raise


async def aio_call():
    """GET the bench's server (100 ms) on an idle keep-alive connection of this event loop, or a new one."""
    loop = asyncio.get_running_loop()
    pool = getattr(loop, "_bench_idle", None)
    if pool is None:
        pool = loop._bench_idle = []
    host, port, path = _target()
    reader, writer = pool.pop() if pool else await asyncio.open_connection(host, port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    status = await reader.readline()
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    await reader.readexactly(length)
    if b" 200 " not in status:
        raise RuntimeError(f"the bench's HTTP server answered {status!r}")
    pool.append((reader, writer))
