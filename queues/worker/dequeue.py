"""Dequeueing that cannot lose a job and honours paused queues, for one queue or several.

rq 3.0 dequeues from a single queue with BLMOVE into ``<p>:queue:<q>:intermediate`` (Redis >= 6.2),
so a worker killed between the pop and the started registry leaves the job in that list, where it
can be found. With several queues it still uses BLPOP (``Queue.lpop``): a kill between the pop and
the started registry loses the job outright (rq issues #1716, #2079). And rq knows no pause.

``Dequeuer.pop`` runs one Lua script (``popscript.POP_LUA``): in the worker's priority order, it skips the
queues in the paused set and LMOVEs the head of the first non-empty one into that queue's
intermediate list, atomically — so a job of a queue paused a moment ago is never taken, and the
pause costs no round trip of its own. The script also hands back the job's hash (``Popped.data``): the
worker reads the job in the same round trip it pops it in. It pops up to ``count`` jobs at once (the concurrent
and async workers' free slots: ``jobs_to_pop``), the first returned and the others handed out by the next
calls without Redis; the fork-free worker sends its one-job pop with its previous success
(``Dequeuer.command``, ``intake.Intake.pop_ahead``). A queue is three lists, its priority bands
(``queues.enqueue(..., priority=)``, ``keys.band_key``): the script takes its high band, then its
normal one (rq's list), then its low one, into the queue's one intermediate list. A pop that starts its jobs takes
a band's jobs in one LPOP with a count (Redis 6.2), and on Redis 7 in one LMPOP over the bands left (the first that
holds any): a band found empty then costs no command of its own (a pop of the fork-free worker, whose high band is
empty as a rule: two commands -> one). When nothing is there:

- one queue not paused: a blocking BLMOVE on its normal band (as rq), then a SISMEMBER to see whether
  the queue was paused while the worker waited (that job goes back to the head of its queue, untouched).
  Redis has no blocking LMOVE from several lists, and a push to the high or low band does not wake a
  BLMOVE on the normal one: a queue that got a banded job in the last day (``keys.banded_key``, set by
  every such push and reported by the script) is polled as several queues are (below). A queue never
  given a priority keeps this blocking path and its pick-up latency; the first banded job of an idle
  worker waits at most ``DEQUEUE_WAIT_SECONDS`` (2 s), the end of the BLMOVE (docs/decisions.md);
- several: Redis has no blocking multi-key LMOVE, so the worker polls — after 50 ms, doubling up to
  ``MULTI_QUEUE_POLL_SECONDS`` (0.5 s) — the way Sidekiq Pro's reliable fetch does;
- all paused: it waits ``pause_poll`` seconds and looks again.

While one of its queues is paused, no wait lasts longer than ``pause_poll`` (1 s): a resume is seen
within a second.

The job leaves the intermediate list in the same MULTI that records it as started (the worker's
``prepare_execution``), or never enters it: the pop of a worker that runs its jobs itself writes the start (``plan``,
``popstart.py``, the entries ``{3, ...}`` of ``POP_LUA``); a job stranded there by a killed worker is pushed
back to the head of its queue by the abandoned-job scan. The alternative — one worker process per queue — would
keep rq's BLMOVE but multiply processes and lose the priority order between queues (docs/operations.md).
"""

import collections
import logging
import threading
import time

import redis
from redis.exceptions import NoScriptError
from rq.utils import as_text

from queues.connection import combine
from queues.jobs import capped, gate
from queues.jobs import meta as jobmeta
from queues.keyspace import entries, keys, quarantine
from queues.worker.abandoned import give_back
from queues.worker.popscript import POP_LUA, TWICE_LUA

FIRST_POLL_SECONDS = 0.05
DROPPED = object()  # what a pop returns internally for an entry it dropped (``_checked``)


class Popped(tuple):
    """What ``Dequeuer.pop`` returns: ``(queue, job id)``, and in ``data`` the job's hash as read in the
    same round trip ({field: value} bytes), or None when it could not be (then the caller reads it). ``started``:
    (the ``popstart.Plan``, the execution id) when the pop started the job too, else None."""

    def __new__(cls, queue, job_id, data=None, started=None):
        popped = super().__new__(cls, (queue, job_id))
        popped.data = data
        popped.started = started
        return popped


def _as_hash(flat):
    """HGETALL's reply as Lua hands it over (a flat list), as redis-py gives it ({field: value}); None if empty."""
    if not flat:
        return None
    items = iter(flat)
    return dict(zip(items, items))


class Dequeuer:
    """Pops job ids for one worker. ``should_stop()`` ends a wait early."""

    def __init__(
        self,
        connection,
        *,
        poll_cap=0.5,
        pause_poll=1.0,
        should_stop=lambda: False,
        log=None,
        who="Worker",
        on_empty=None,
        before_redis=None,
        plan=None,
    ):
        self.connection = connection
        # ``plan(count)``: the start of a pop of up to ``count`` jobs (``popstart.plan``), or None: it pops only
        self.plan = plan
        # called before a pop goes to Redis (not for a job a pop of several took already): the concurrent worker's
        # held jobs started first (concurrent.OptimaConcurrentWorker.start_held)
        self.before_redis = before_redis
        self.on_empty = on_empty  # called when a pop finds no job, before it waits (intake.py: the worker IDLE)
        self.log = log or logging.getLogger("queues.resilience")
        self.who = who
        self.script = connection.register_script(POP_LUA)
        self.poll_cap = poll_cap
        self.pause_poll = pause_poll
        self.should_stop = should_stop
        self.paused = set()  # the worker's queues found paused by the latest empty pop
        self.banded = set()  # the worker's queues found empty but marked banded by the latest empty pop
        self._poll = FIRST_POLL_SECONDS
        self._count = 1  # jobs the script pops at most (``pop``'s ``count``)
        self.popped = collections.deque()  # jobs a pop of several took beyond the first: the next pops' answers
        self.popped_at = 0.0  # time.monotonic() of the pop that took them
        # ``popped`` and the reply sent ahead, taken by one thread at a time: the fork-free worker's lifeline gives
        # back the jobs held too long (worker/prefetch.py) while its main thread runs a job
        self._lock = threading.RLock()
        # (queues, reply, plan) of the script sent with other commands (``sent``): the next pop's first look
        self._ahead = None
        self._sent_plan = None  # the start of the pop ``command`` made, until ``sent`` hears of its reply
        # the execution ids of each start whose reply was not read (a pop's: a connection lost, an error amid the
        # script; or its taking back's, ``Intake.unstart``): it may have started jobs this worker does not know of
        # (``popstart.reclaim``, ``lost``)
        self.unanswered = []

    def pop(self, queues, wait, count=1):
        """(queue, job id) moved into the queue's intermediate list, or None. ``wait``: seconds to
        wait for a job (None: do not wait, for burst mode). A key of the wrong type or an id that
        is not text is put aside with an ERROR naming it (``_set_aside``), never raised.

        ``count``: how many jobs one call of the script may pop (the concurrent worker's free slots: one round
        trip for several jobs, issue 36); the first is returned, the others (``popped``, in the intermediate list
        as any popped job) are the answers of the next calls, made without Redis. A reply of the script sent
        already (``sent``) is this pop's first look. A caller that ends with jobs popped and not returned gives
        them back (``take_popped``)."""
        with self._lock:
            if self.popped:
                return self.popped.popleft()
        if self.before_redis is not None:
            self.before_redis()
        with self._lock:
            ahead, self._ahead = self._ahead, None
        if ahead is not None:
            queues, *ahead = ahead
        self._count = max(1, int(count))
        for _ in range(100):  # each round drops or sets aside one bad entry; then a last plain try
            try:
                found = self._pop(queues, wait, ahead)
                ahead = None
            except redis.ResponseError as exc:
                if "WRONGTYPE" not in str(exc):
                    raise
                self._set_aside(queues)
                continue
            if found is not DROPPED:
                return found
        return None

    def _pop(self, queues, wait, ahead=None):
        found = self._pop_now(queues) if ahead is None else self._take(queues, *ahead)
        if found is None and self.on_empty is not None:
            self.on_empty()
        if found is not None or wait is None:
            return found  # DROPPED too: the caller pops again at once
        active = [q for q in queues if q.name not in self.paused]
        if self.paused:
            wait = min(wait, self.pause_poll)  # a resume is seen within pause_poll seconds
        if len(active) == 1 and active[0].name not in self.banded:
            return self._block_on(active[0], wait)
        self._sleep(min(wait, self.pause_poll) if not active else min(wait, self._poll))
        if active:
            self._poll = min(self._poll * 2, self.poll_cap)
        return self._pop_now(queues)

    def take_popped(self, held_over=None):
        """The jobs popped and not returned, in their order, now the caller's to give back: those a pop of several
        took beyond the first (``pop``'s ``count``), then those of a reply ``sent`` and not yet looked at (read as
        a pop reads it: an entry that is not a job id dropped, a copy pushed twice reported). With ``held_over``
        (seconds): none unless a pop of several took jobs beyond the first that long ago and some are still held,
        judged under the same lock as the taking (worker/prefetch.py: another thread may pop meanwhile)."""
        with self._lock:
            if held_over is not None and (not self.popped or time.monotonic() - self.popped_at < held_over):
                return []
            left = list(self.popped)
            self.popped.clear()
            ahead, self._ahead = self._ahead, None
            if ahead is not None:
                first = self._take(*ahead)
                if isinstance(first, Popped):
                    left.append(first)
                left.extend(self.popped)
                self.popped.clear()
        return left

    def command(self, queues, count=1):
        """The pop's script call, for up to ``count`` jobs, as a command to send (``EVALSHA``, its sha, its keys and
        arguments): what ``_pop_now`` runs, for a caller that sends it with other commands (``Intake.pop_ahead``);
        its reply goes to ``sent``."""
        keys_, args, plan = self._arguments(queues, max(1, int(count)))
        self._sent_plan = plan
        return ("EVALSHA", self.script.sha, len(keys_), *keys_, *args)

    def sent(self, queues, reply):
        """The reply of ``command(queues)``, sent with other commands: the next pop's first look. An error in its
        place (NOSCRIPT after a restart, WRONGTYPE) is dropped: that pop looks itself (a script that failed started
        nothing)."""
        plan, self._sent_plan = self._sent_plan, None
        self._ahead = None if isinstance(reply, Exception) else (queues, reply, plan)
        if self._ahead is not None:
            self._answered(plan)

    def lost(self):
        """The execution ids of the starts whose replies were not read (``unanswered``)."""
        return {execution_id for ids in self.unanswered for execution_id in ids}

    def _answered(self, plan):
        if plan is not None and plan.ids in self.unanswered:
            self.unanswered.remove(plan.ids)

    def holds(self):
        """Whether jobs popped are waiting to be returned (``popped``, or a reply ``sent``)."""
        return bool(self.popped) or self._ahead is not None

    def _arguments(self, queues, count):
        """The script's keys and arguments for a pop of up to ``count`` jobs of ``queues``, and the start it writes
        (a ``popstart.Plan``, or None)."""
        keys_ = [keys.paused_key()]
        for queue in queues:
            keys_ += [
                *keys.band_keys(queue.key),
                keys.intermediate_key(queue.key),
                keys.banded_key(queue.name),
                keys.started_key(queue.name),
            ]
        plan = self.plan(count) if self.plan is not None else None
        start = plan.argv() if plan is not None else []
        if plan is not None:
            self.unanswered.append(plan.ids)  # until its reply is read (``_pop_now``, ``sent``)
        return keys_, [keys.job_key_prefix(), count, len(start), *start, *(q.name for q in queues)], plan

    def _pop_now(self, queues):
        keys_, args, plan = self._arguments(queues, self._count)
        reply = self._run(keys_, args)
        self._answered(plan)
        return self._take(queues, reply, plan)

    def _run(self, keys_, args):
        """The pop script's reply. Where the client's round trips are combined (the concurrent and async workers:
        ``connection/combine.py``), the pop goes with the jobs' starts and successes that are ready meanwhile, in
        one write: the main thread's pop was a round trip of its own beside them, about one in two of a
        ``--concurrency 8`` worker's on no-op jobs (issue 36). Else, and when the server lacks the script
        (NOSCRIPT: redis-py's ``Script`` loads it), on its own."""
        combiner = combine.of(self.connection)
        if combiner is not None:
            try:
                return combiner.run([("EVALSHA", self.script.sha, len(keys_), *keys_, *args)], combine.read_one)
            except NoScriptError:
                pass  # loaded by the call below
        return self.script(keys=keys_, args=args)

    def _take(self, queues, reply, plan=None):
        """The pop script's reply -> what ``_pop_now`` returns: the first job of those it popped (the others into
        ``popped``), DROPPED when it dropped every one, None when there was none."""
        if reply[0] == 1:
            self._poll = FIRST_POLL_SECONDS
            if plan is not None:
                plan.answered(reply[1])
            found = []
            at, size = 2, len(reply)
            while at < size:  # each entry: kind, the queue's key, id, execution id, n, then n items of its hash
                kind, key, raw_id, execution_id, length = reply[at : at + 5]
                data = _as_hash(reply[at + 5 : at + 5 + length])
                at += 5 + length
                queue = next(q for q in queues if q.key == as_text(key))
                if kind == 2:
                    self._twice(queue, raw_id)
                    continue
                if kind == 3:  # started by the pop: its id is a job's, the pop read it in the queue's hash
                    found.append(Popped(queue, as_text(raw_id), data, (plan, as_text(execution_id))))
                    continue
                job = self._checked(queue, raw_id, data)
                if job is not DROPPED:
                    found.append(job)
            if not found:
                return DROPPED
            if len(found) > 1:
                self.popped_at = time.monotonic()  # first: a look at ``popped`` from another thread sees it fresh
                self.popped.extend(found[1:])
            return found[0]
        paused_end = 2 + reply[1]  # reply[1]: how many paused names follow
        self.paused = {as_text(name) for name in reply[2:paused_end]}
        self.banded = {as_text(name) for name in reply[paused_end:]}
        return None

    def _block_on(self, queue, wait):
        job_id = self.connection.blmove(queue.key, keys.intermediate_key(queue.key), max(1, int(wait)), "LEFT", "RIGHT")
        if job_id is None:
            return None
        found = self._checked(queue, job_id)
        if found is DROPPED:
            return DROPPED
        job_id = found[1]
        with self.connection.pipeline() as pipe:  # one round trip (a MULTI): a copy, the pause, and the job
            pipe.eval(TWICE_LUA, 1, keys.intermediate_key(queue.key), job_id)
            pipe.sismember(keys.paused_key(), queue.name)
            capped.read_key(
                pipe, keys.job_key(job_id), budget=entries.RUN_STORED_BYTES
            )  # not HGETALL: entries.too_large
            pipe.hdel(keys.job_key(job_id), jobmeta.PUT_BACK)  # read just above: it vouches for this pop only
            twice, paused, data, _ = pipe.execute(raise_on_error=False)
        if isinstance(twice, Exception):
            raise twice
        if twice:
            return self._twice(queue, job_id)
        if isinstance(paused, Exception):
            raise paused
        if paused:
            give_back(self.connection, queue.key, job_id)  # paused while we waited: untouched
            self.log.info("%s: queue %s was paused meanwhile; job %s put back", self.who, queue.name, job_id)
            self.paused.add(queue.name)
            return None
        data = capped.hash_of(data)
        whole = isinstance(data, dict) and data and not isinstance(data, capped.Oversized)
        return Popped(queue, job_id, data if whole else None)  # None: the caller reads it (and refuses it)

    def _checked(self, queue, raw_id, data=None):
        """(queue, id) for a popped id that can be a job id; else DROPPED, the entry dropped from the
        intermediate list with an ERROR (an id that is not UTF-8 text, holds ':' or is longer than
        ``entries.ID_CHARS``)."""
        try:
            job_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
        except UnicodeDecodeError:
            job_id = None
        if job_id and ":" not in job_id and len(job_id) <= entries.ID_CHARS:
            return Popped(queue, job_id, data)
        self.connection.lrem(keys.intermediate_key(queue.key), 1, raw_id)
        shown = raw_id if isinstance(raw_id, bytes) else str(raw_id).encode()
        self.log.error(
            "%s: dropped entry %r of %s: not a job id", self.who, entries.cut_bytes(shown, entries.ID_CHARS), queue.key
        )
        return DROPPED

    def _twice(self, queue, raw_id):
        """DROPPED: a copy of an id another worker popped and has not started yet, taken off (``TWICE_LUA``)."""
        shown = raw_id.decode(errors="backslashreplace") if isinstance(raw_id, bytes) else str(raw_id)
        gate.report_dropped(
            entries.cut(shown, entries.ID_CHARS),
            f"popped from queue {queue.name} while a worker holds it, popped and not yet started (pushed twice)",
        )
        return DROPPED

    def _set_aside(self, queues):
        """A queue's list, its intermediate list or the paused set holds another type of key
        (written by something else): renamed to ``<key>.corrupt-<unix time>``, kept for
        investigation, with an ERROR naming it (``queues.keyspace.quarantine``); the next pop goes on with the rest."""
        expected = {keys.paused_key(): "set"}
        for queue in queues:
            for key in (*keys.band_keys(queue.key), keys.intermediate_key(queue.key)):
                expected[key] = "list"
        quarantine.set_aside(self.connection, expected, who=self.who, log=self.log)

    def _sleep(self, seconds):
        deadline = time.monotonic() + seconds
        while not self.should_stop():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(0.2, left))
