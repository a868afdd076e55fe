"""The kernel's side of a worker's processes: the C library loaded once, and ``die_with_parent``.

``die_with_parent`` makes a child (the work horse, RQ's scheduler process, a pool's member) get SIGKILL
when its parent dies, on Linux: a worker killed with SIGKILL must not leave an orphan finishing a job
that is being retried elsewhere, or a scheduler that keeps its lock. A leaf (it imports nothing of
queues), so that ``periodic/`` may use it without importing the worker.
"""

import ctypes
import ctypes.util
import os
import signal

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
