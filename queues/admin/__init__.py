"""The admin of this app: dead letters (view, search, retry, discard), their failure groups, and
the audit trail and the outbox (read only). Django's admin autodiscovery imports this package; the
registrations below are the list of what it shows.

Permissions: seeing dead letters is Django's ``queues.view_deadletter``; retrying and discarding
is ``queues.act_on_deadletter``. A corrupt dead letter (reason ``corrupt``) shows its job's raw hash,
escaped; retrying it is refused (nothing to run), discarding it works like any other. A row never
verified (``unverified``, ``unsigned``) is retried only from its own page, once its function and
arguments were shown as not verified and confirmed; bulk and group retries skip it. Rows are
never deleted here: a discarded dead letter stays, marked ``discarded``. Every retry or discard
writes one audit row per dead letter. Lists stay fast with 200,000 rows: no full count, indexed
filters, 100 rows a page.

Failure groups (``FailureGroup``, one per fingerprint: docs/operator.md "Failure groups") have their
own read-only list; from a group, its rows (the dead-letter list filtered by ``?fingerprint=``),
and retry or discard of its open rows (``queues.act_on_deadletter``, confirmed first), each row
through ``retry_dead_letter``/``discard_dead_letter``, one audit row per group.

Stored periodic schedules (``StoredSchedule``: added, or overriding a declared one) are edited in
``schedules``; each add, change and delete is audited, and the running ``rqscheduler`` picks it up.

Modules: ``base`` (read-only and acting model admins, the one action runner), ``filters`` (the
dead-letter list's filters), ``deadletters``, ``groups``, ``readonly`` (audit trail, outbox), ``schedules``.
"""

from django.contrib import admin

from queues.admin.deadletters import DeadLetterAdmin
from queues.admin.groups import FailureGroupAdmin
from queues.admin.readonly import AuditEntryAdmin, OutboxEntryAdmin
from queues.admin.schedules import StoredScheduleAdmin
from queues.board import throttle
from queues.models import AuditEntry, DeadLetter, FailureGroup, OutboxEntry, StoredSchedule

admin.site.register(DeadLetter, DeadLetterAdmin)
admin.site.register(FailureGroup, FailureGroupAdmin)
admin.site.register(AuditEntry, AuditEntryAdmin)
admin.site.register(OutboxEntry, OutboxEntryAdmin)
admin.site.register(StoredSchedule, StoredScheduleAdmin)

# The admin login form counts failed sign-ins per client address and answers 429 past
# QUEUE_LOGIN_FAILURES (queues/board/throttle.py). Done here, before admin.site.urls is built.
throttle.protect_admin_login(admin.site)
