"""Repeated problems of one kind on one key: logged once a minute with a count, every one counted in /metrics.

Whoever can write to the queues' Redis can push 200,000 bogus ids onto a band: the workers drop
each, and one ERROR per entry was 47 MB of logs. Every path that drops, sets aside or buries as
corrupt an entry it found (``entries.report``, ``quarantine.set_aside``, ``failures/refused.py``,
``failures/corrupt.py``, the worker's pop and intake, the history) reports it through ``report(kind,
key, message, *args)``:

- the first occurrence of (``kind``, ``key``) in a process is logged at once, as given (its message
  names the entry and why);
- the repeats within the next ``WINDOW_SECONDS`` are counted, not logged; one line sums them up
  ("… and N more like it on <key> in the last 60 s") when the window has ended: at the next
  occurrence after it, or at ``flush_due()`` (each worker's heartbeat calls it). Whatever the
  volume, a (kind, key) costs at most two lines a minute;
- every occurrence, logged or not, is counted in Redis (HINCRBY ``<p>:optima:quarantined`` field
  ``kind``), shown by /metrics as ``optima_quarantined_entries_total{kind}``: written with each line
  logged and at most once a second between them (and at exit, and at ``flush_due``), so a flood costs
  no extra round trip per entry. A count Redis did not take is kept and added to the next write.

``kind`` is one of ``KINDS`` (a bounded metric label; anything else counts as ``other``). ``key``
should be the key the problem is on (a queue's list, a registry), not the entry itself: a flood of
distinct ids on one band is one key. At most ``MAX_KEYS`` keys are followed per process; past that,
new keys of a kind share one, ``(other keys)``.

Per process, thread-safe: the lock guards only the counts (no log call and no Redis call under it),
and a forked child (a work horse) starts with none (``os.register_at_fork``).
"""

import atexit
import logging
import os
import threading
import time

from queues.connection.clients import get_connection
from queues.keyspace import keys

WINDOW_SECONDS = 60.0
MAX_KEYS = 256
OTHER_KEYS = "(other keys)"
WRITE_EVERY_SECONDS = 1.0  # counts are written at most this often (and with each line, and at exit): one
# HINCRBY per entry would double a flood's round trips
RETRY_WRITE_SECONDS = 5.0  # after a failed counter write, later ones wait this long (a Redis away costs no time)

# The bounded values of the metric's ``kind`` label.
DROPPED = "dropped"  # a popped entry dropped from its queue: no job id, its hash gone or no hash, a replay
CORRUPT = "corrupt"  # a job whose hash cannot be read as a job, dead-lettered ``corrupt``
REFUSED = "refused"  # a job the gate refused (unsigned, not a declared job, canceled): not run
WRONG_TYPE = "wrong_type"  # a key of the wrong type renamed aside
NOT_UTF8 = "not_utf8"  # a set member that is not UTF-8 moved aside
BAD_ENTRY = "bad_entry"  # an entry a reader cannot use, skipped (``entries.report``)
HISTORY = "history"  # a history sample or key set aside (``metrics/history.py``)
OTHER = "other"
KINDS = (DROPPED, CORRUPT, REFUSED, WRONG_TYPE, NOT_UTF8, BAD_ENTRY, HISTORY, OTHER)

logger = logging.getLogger("queues.resilience")


class _Window:
    __slots__ = ("level", "log", "started", "logged", "repeats", "last")

    def __init__(self, started, level, log):
        self.started, self.level, self.log = started, level, log
        self.logged = 1  # occurrences of this window logged one by one (the first, then up to ``burst``)
        self.repeats = 0  # occurrences after those, not logged
        self.last = None  # (message, args) of the latest of them


class Reporter:
    """The windows of this process ((kind, key) -> ``_Window``) and the counts not yet in Redis."""

    def __init__(self, window=WINDOW_SECONDS, max_keys=MAX_KEYS, clock=time.monotonic):
        self.window, self.max_keys, self.clock = window, max_keys, clock
        self.reset()

    def reset(self):
        """Forget every window and every count not yet written (a forked child; the tests)."""
        self._lock = threading.Lock()
        self._windows = {}
        self._unwritten = {}  # kind -> occurrences not yet counted in Redis
        self._write_after = 0.0  # no write before (after a failed one)
        self._written_at = -WRITE_EVERY_SECONDS

    def report(self, kind, key, message, *args, log=None, level=logging.ERROR, connection=None, burst=1):
        """Count one occurrence of ``kind`` on ``key``; log ``message % args`` at ``level`` when it is one of
        the first ``burst`` of its window (after the summary of the window before, if that had repeats).
        ``burst`` > 1 where each occurrence names something an operator looks for (a replayed job's id): a
        few are each named, a flood is still at most ``burst`` lines and a summary a minute."""
        kind = kind if kind in KINDS else OTHER
        log = log or logger
        now = self.clock()
        with self._lock:
            self._unwritten[kind] = self._unwritten.get(kind, 0) + 1
            if (kind, key) not in self._windows and len(self._windows) >= self.max_keys:
                key = OTHER_KEYS
            window = self._windows.get((kind, key))
            ended = window if window is not None and now - window.started >= self.window else None
            if window is None or ended is not None:
                self._windows[(kind, key)] = _Window(now, level, log)
                first = True
            elif window.logged < burst:
                window.logged += 1
                first = True
            else:
                window.repeats += 1
                window.last = (message, args)
                first = False
        if ended is not None and ended.repeats:
            self._summarise(kind, key, ended, now)
        if first:
            log.log(level, message, *args)
        self.write_counts(connection, due_only=not first)

    def count(self, kind, connection=None):
        """Count one occurrence of ``kind`` that its caller logs itself (``entries.report``: once per entry)."""
        kind = kind if kind in KINDS else OTHER
        with self._lock:
            self._unwritten[kind] = self._unwritten.get(kind, 0) + 1
        self.write_counts(connection, due_only=True)

    def flush_due(self, connection=None):
        """Sum up the windows that ended (a line each, for those with repeats) and forget them; write
        the counts Redis has not taken yet. -> how many lines were logged."""
        now = self.clock()
        with self._lock:
            ended = {k: w for k, w in self._windows.items() if now - w.started >= self.window}
            for k in ended:
                del self._windows[k]
        lines = 0
        for (kind, key), window in ended.items():
            if window.repeats:
                self._summarise(kind, key, window, now)
                lines += 1
        self.write_counts(connection)
        return lines

    def _summarise(self, kind, key, window, now):
        message, args = window.last
        try:
            last = message % args if args else message
        except (TypeError, ValueError):
            last = f"{message} {args!r}"
        window.log.log(
            window.level,
            "%s: %d more like it in the last %d s (%s; counted in /metrics as optima_quarantined_entries_total); "
            "the last: %s",
            key,
            window.repeats,
            max(1, round(now - window.started)),
            kind,
            last,
        )

    def write_counts(self, connection=None, due_only=False):
        """HINCRBY the counts not yet in Redis (``due_only``: unless written less than ``WRITE_EVERY_SECONDS``
        ago); on failure they are kept for the next write."""
        with self._lock:
            now = self.clock()
            if (
                not self._unwritten
                or now < self._write_after
                or (due_only and now < self._written_at + WRITE_EVERY_SECONDS)
            ):
                return
            counts, self._unwritten, self._written_at = self._unwritten, {}, now
        try:
            connection = connection or get_connection()
            with connection.pipeline(transaction=False) as pipe:
                for kind, n in counts.items():
                    pipe.hincrby(keys.quarantined_key(), kind, n)
                pipe.execute()
        except Exception:  # noqa: BLE001 — a count must never fail the caller; it waits for the next write
            with self._lock:
                for kind, n in counts.items():
                    self._unwritten[kind] = self._unwritten.get(kind, 0) + n
                self._write_after = self.clock() + RETRY_WRITE_SECONDS

    def unwritten(self):
        with self._lock:
            return dict(self._unwritten)


reporter = Reporter()
report = reporter.report
count = reporter.count
flush_due = reporter.flush_due

atexit.register(reporter.write_counts)  # the last second's counts of a process that ends

os.register_at_fork(after_in_child=reporter.reset)  # a horse forked mid-report starts with a free lock
