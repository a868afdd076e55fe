"""Database models of the queues app.

``DeadLetter`` mirrors jobs that reached the dead letter (see ``queues/failures/deadletter.py``);
``FailureGroup`` gathers the dead letters of one fingerprint (``queues/failures/fingerprint.py``);
``AuditEntry`` records every operator action (see ``queues/audit.py``);
``OutboxEntry`` is a job accepted but not yet in Redis (see ``queues/producer/outbox.py``);
``StoredSchedule`` is a periodic schedule kept in the database and edited in the admin
(``queues/periodic/stored.py``).
"""

from django.conf import settings
from django.db import models

from queues.keyspace import entries

# Said at the end of a dead letter's message when something it held had a NUL character.
NUL_NOTE = "\n(NUL characters, U+0000, are stored as the text \\x00: the database cannot hold them)"


def escape_nul(instance, keep=()):
    """Every text and JSON field of ``instance`` with its NUL characters stored as ``\\x00``
    (``entries.without_nul``), but the fields named in ``keep``; -> whether any had one."""
    changed = False
    for field in instance._meta.concrete_fields:
        if field.name in keep or not isinstance(field, models.CharField | models.TextField | models.JSONField):
            continue
        value, had = entries.without_nul(getattr(instance, field.attname))
        if had:
            setattr(instance, field.attname, value)
            changed = True
    return changed


class DeadLetter(models.Model):
    class Status(models.TextChoices):
        OPEN = "open", "open"
        RETRIED = "retried", "retried"
        DISCARDED = "discarded", "discarded"
        # An operator stopped the running job (the panel's Stop, rq's stop-job command): not retried, and
        # not waiting for an operator either. Still retried as an open row is (failures/mirror.py).
        STOPPED = "stopped", "stopped by an operator"

    prefix = models.CharField(max_length=64)
    queue = models.CharField(max_length=200, db_index=True)
    job_id = models.CharField(max_length=200)
    func_path = models.CharField(max_length=500, db_index=True)
    args = models.JSONField(default=list, blank=True)
    kwargs = models.JSONField(default=dict, blank=True)
    exc_type = models.CharField(max_length=300, blank=True, db_index=True)
    exc_message = models.TextField(blank=True)
    traceback = models.TextField(blank=True)
    attempts_made = models.PositiveIntegerField(default=0)
    attempts_allowed = models.PositiveIntegerField(default=0)
    reason = models.CharField(max_length=32, blank=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    first_failed_at = models.DateTimeField(null=True, blank=True)
    dead_at = models.DateTimeField(db_index=True)
    worker = models.CharField(max_length=300, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN, db_index=True)
    times_dead = models.PositiveIntegerField(default=1)
    retried_as = models.CharField(max_length=200, blank=True)
    # A job refused as ``corrupt`` (queues/jobs/gate.py): its Redis hash exactly as it was, as JSON
    # ``[[field, value], ...]`` with every name and value base64-encoded — such bytes (pickles,
    # invalid UTF-8, NUL) cannot go into a PostgreSQL text column as they are. A default in the
    # database too: the previous release's workers, still running during a deploy, insert rows
    # without this column.
    raw_hash = models.TextField(blank=True, default="", db_default="")
    # queues.failures.fingerprint.fingerprint(func_path, exc_type, exc_message): the row's FailureGroup.
    # '' for a row written by the previous release (hence the database default): reconcile groups it.
    fingerprint = models.CharField(max_length=64, blank=True, default="", db_default="")
    # What a retry of a job no longer in Redis carries over (``deadletter.carried``): its owner
    # (meta) and its limit key, as JSON; '' when none (and for rows of the previous release).
    carried = models.TextField(blank=True, default="", db_default="")
    # When reconcile found this open dead letter's job gone from Redis (a flush, a Redis restarted without
    # persistence, a failover that lost writes): the row is then the only record of it, and stays open until
    # an operator retries it (re-enqueued from the row) or discards it. Null while its job is in Redis.
    only_in_database_since = models.DateTimeField(
        null=True,
        blank=True,
        help_text="when reconcile found its job gone from Redis: held only in the database; "
        "a retry re-enqueues it from this row",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["prefix", "job_id"], name="queues_deadletter_unique_job")]
        indexes = [
            models.Index(fields=["prefix", "status", "-dead_at"], name="queues_dl_status_dead"),
            # A group's rows, newest first (the admin's rows of a group; a group's retry or discard).
            # fingerprint first: with prefix first, SQLite picks this index for the unfiltered list
            # (prefix = ?) and sorts all 200,000 rows (page 1,000: 1.0 s instead of 0.13 s).
            models.Index(fields=["fingerprint", "prefix", "-dead_at"], name="queues_dl_fingerprint"),
        ]
        ordering = ["-dead_at", "-id"]
        permissions = [("act_on_deadletter", "Can retry and discard dead letters")]

    def __str__(self):
        return f"{self.queue}:{self.job_id} ({self.status})"

    def save(self, *args, **kwargs):
        # A NUL in an error message or an argument (a marketplace response inside an exception) would
        # fail PostgreSQL's write (DataError) at every mirror and every reconcile: stored escaped, said so.
        # The job id is kept as it is: it names the job in Redis (and a NUL one is no id the app writes).
        if escape_nul(self, keep=("prefix", "job_id")) and not self.exc_message.endswith(NUL_NOTE):
            self.exc_message += NUL_NOTE
        super().save(*args, **kwargs)


class FailureGroup(models.Model):
    """Dead letters of one fingerprint: the same function failing with the same exception and the
    same message once ids, numbers, UUIDs and URLs are normalised away (``queues/failures/fingerprint.py``).

    ``count`` counts deaths, not open rows: every death mirrored adds one (a job retried that dies
    again adds one more), and retrying or discarding rows never lowers it, like an error tracker's
    event count. For a group whose rows never changed fingerprint it equals the sum of their
    ``times_dead``. Written in the same transaction as the dead letter's row (``queues.failures.mirror.upsert``).
    """

    prefix = models.CharField(max_length=64)
    fingerprint = models.CharField(max_length=64)
    func_path = models.CharField(max_length=500)
    exc_type = models.CharField(max_length=300, blank=True)
    pattern = models.TextField(blank=True, help_text="the message with ids, numbers and URLs normalised away")
    example_message = models.TextField(blank=True)
    example = models.ForeignKey(
        DeadLetter,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="the dead letter of the group's latest death",
    )
    count = models.PositiveIntegerField(default=0, help_text="deaths seen (never lowered by a retry or discard)")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    queues = models.JSONField(default=list, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["prefix", "fingerprint"], name="queues_group_unique")]
        indexes = [models.Index(fields=["prefix", "-last_seen"], name="queues_group_last_seen")]
        ordering = ["-last_seen", "-id"]

    def __str__(self):
        from queues.failures.fingerprint import title  # a leaf of the standard library

        return f"{title(self.exc_type, self.pattern)} — {self.func_path} ({self.count})"

    def save(self, *args, **kwargs):
        escape_nul(self, keep=("prefix", "fingerprint"))  # its texts come from a dead letter's (see DeadLetter.save)
        super().save(*args, **kwargs)


class AuditEntry(models.Model):
    class Outcome(models.TextChoices):
        OK = "ok", "ok"
        PARTIAL = "partial", "partial"
        ERROR = "error", "error"

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    identity = models.CharField(max_length=200, help_text="user name, or the basic-auth identity")
    action = models.CharField(max_length=64, db_index=True)
    queue = models.CharField(max_length=200, blank=True, db_index=True)
    job_ids = models.JSONField(default=list, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default=Outcome.OK)
    detail = models.TextField(blank=True)
    prefix = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "audit entries"
        permissions = [
            ("view_queue_panel", "Can view the queue panel"),
            ("act_on_queue_panel", "Can act in the queue panel (pause, requeue, delete, empty)"),
        ]

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.identity} {self.action} {self.queue}"

    def save(self, *args, **kwargs):
        escape_nul(self)  # a detail may quote a dead letter's message (see DeadLetter.save)
        super().save(*args, **kwargs)


class OutboxEntry(models.Model):
    """A job accepted in a database transaction and not yet written to Redis (``queues/producer/outbox.py``).

    Written in the caller's transaction; deleted once the job is in Redis. ``job`` is the job's
    Redis hash as built and signed at the enqueue (base64 where a value is bytes), so a relay writes
    exactly the job the caller was given the id of. ``claimed_by``/``claimed_until``: a pusher (the
    committing process, from the insert; or a relay) owns the row until it is pushed or the claim
    runs out; null: nobody holds it (a relay may take it).
    """

    prefix = models.CharField(max_length=64)
    queue = models.CharField(max_length=200)
    job_id = models.CharField(max_length=200)
    job = models.JSONField()
    # The job's due time for a delayed enqueue (``delay=`` / ``at=``); null: queued at once.
    due_at = models.DateTimeField(null=True, blank=True)
    explicit_id = models.BooleanField(default=False)
    unique_key = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField()
    claimed_until = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=64, blank=True, default="")
    push_attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["prefix", "job_id"], name="queues_outbox_unique_job")]
        indexes = [models.Index(fields=["prefix", "claimed_until", "id"], name="queues_outbox_claim")]
        ordering = ["id"]
        verbose_name_plural = "outbox entries"

    def __str__(self):
        return f"{self.queue}:{self.job_id} (outbox)"


class StoredSchedule(models.Model):
    """A periodic schedule edited in the admin (``queues/periodic/stored.py``, docs/operator.md).

    Its ``schedule_id`` either names a new schedule (then ``queue``, ``func`` and one of ``cron`` and
    ``interval`` are required) or a schedule declared in settings or an app's ``SCHEDULES``: then the row
    *overrides* it, and each field left blank keeps the declared value (pause one with ``enabled`` off,
    move one by giving a ``cron``). The database wins. Validated as the declared ones are
    (``queues.periodic.validation.validate_entry``); the running ``rqscheduler`` sees a change within one poll.
    """

    class Missed(models.TextChoices):
        ONCE = "once", "once: one run for all missed ticks"
        SKIP = "skip", "skip: none, go on at the next tick"
        CATCH_UP = "catch_up", "catch up: the latest N missed ticks, each its own run"

    prefix = models.CharField(max_length=64)
    schedule_id = models.CharField(
        "id",
        max_length=100,
        help_text="[a-z0-9][a-z0-9_.-]*; the id of a declared schedule overrides it (blank fields keep its values)",
    )
    queue = models.CharField(max_length=200, blank=True)
    func = models.CharField(
        "job", max_length=500, blank=True, help_text="dotted path of a declared job function or of a @task"
    )
    args = models.JSONField("arguments", default=list, blank=True, help_text="a JSON list")
    kwargs = models.JSONField("keyword arguments", default=dict, blank=True, help_text="a JSON object")
    cron = models.CharField(max_length=100, blank=True, help_text="5 fields, at the wall-clock time of the zone")
    interval = models.PositiveIntegerField(null=True, blank=True, help_text="seconds (instead of a cron)")
    tz = models.CharField("zone", max_length=64, blank=True, help_text="an IANA time zone, e.g. Europe/Moscow; UTC")
    missed = models.CharField(
        "missed runs", max_length=16, choices=Missed.choices, blank=True, help_text="blank: the declared policy, once"
    )
    catch_up = models.PositiveIntegerField(null=True, blank=True, help_text="N, for the catch-up policy")
    attempts = models.PositiveIntegerField(null=True, blank=True, help_text="blank: the queue's")
    timeout = models.PositiveIntegerField(null=True, blank=True, help_text="seconds; blank: the queue's")
    enabled = models.BooleanField(default=True, help_text="off: paused, its ticks pass without a run")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["prefix", "schedule_id"], name="queues_storedschedule_unique_id")
        ]
        ordering = ["schedule_id"]

    def __str__(self):
        return self.schedule_id
