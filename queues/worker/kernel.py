"""The kernel's side of a worker's processes: the C library loaded once, and ``die_with_parent``.

``die_with_parent`` makes a child (the work horse, RQ's scheduler process, a pool's member) get SIGKILL
when its parent dies, on Linux: a worker killed with SIGKILL must not leave an orphan finishing a job
that is being retried elsewhere, or a scheduler that keeps its lock. A leaf (it imports nothing of
queues), so that ``periodic/`` may use it without importing the worker.

``fresh_std_streams_after_fork`` gives every child (a horse, RQ's scheduler) its own stdout/stderr: a
buffered stream's lock held by another thread at the fork would hang the child at its first line.
"""

import ctypes
import ctypes.util
import io
import logging
import os
import signal
import sys

PR_SET_PDEATHSIG = 1

_libc = None


def libc():
    """The C library, loaded once per process tree: a worker loads it before it forks, so its work
    horses do not (``find_library`` runs ldconfig: ~2 ms per horse otherwise)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _libc


def die_with_parent(parent_pid):
    """Ask the kernel to SIGKILL this process when its parent dies (Linux; elsewhere a no-op), and
    exit now if the parent is already gone."""
    try:
        libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:
        os._exit(1)


_ABANDONED_STREAMS: list[object] = []  # a child's inherited stdout/stderr: never flushed, closed nor collected there


def _fresh_std_streams():
    """In a freshly forked child: new ``sys.stdout``/``sys.stderr`` objects over the same descriptors.

    A buffered stream's lock is not reset by ``fork``: a child forked while another thread of its parent
    was writing to stderr (a log line of the lifeline, of a job's thread) inherits that lock held, by a
    thread it does not have, and hangs on a futex at its first write (a work horse, RQ's scheduler). The
    inherited objects are kept, untouched, so that nothing flushes them; log handlers that wrote to them
    write to the new ones (logging itself resets its handlers' locks in the child)."""
    for name in ("stdout", "stderr"):
        old = getattr(sys, name, None)
        if not isinstance(getattr(old, "buffer", None), io.BufferedWriter):
            continue  # unbuffered (PYTHONUNBUFFERED: a FileIO under it) or replaced: no lock to inherit
        try:
            raw = io.FileIO(old.fileno(), "w", closefd=False)
        except (OSError, ValueError, AttributeError):
            continue
        new = io.TextIOWrapper(
            io.BufferedWriter(raw),
            encoding=old.encoding,
            errors=old.errors,
            line_buffering=old.line_buffering,
            write_through=old.write_through,
        )
        _ABANDONED_STREAMS.append(old)
        setattr(sys, name, new)
        if getattr(sys, f"__{name}__", None) is old:
            setattr(sys, f"__{name}__", new)
        for ref in list(logging._handlerList):  # noqa: SLF001 — the only registry of live handlers
            handler = ref()
            if isinstance(handler, logging.StreamHandler) and handler.stream is old:
                handler.stream = new  # not setStream(): it would flush the old stream, taking its lock


_registered = False


def fresh_std_streams_after_fork():
    """Have every child this process forks from now on start with fresh stdout/stderr (``_fresh_std_streams``)."""
    global _registered
    if not _registered:
        os.register_at_fork(after_in_child=_fresh_std_streams)
        _registered = True
