"""The admins that only show what the system wrote: the audit trail and the outbox."""

from django.contrib import admin
from django.utils.text import Truncator

from queues import conf
from queues.admin.base import ReadOnlyModelAdmin


class AuditEntryAdmin(ReadOnlyModelAdmin):
    """The audit trail: read only, for whoever holds ``queues.view_auditentry``."""

    list_display = ("at", "identity", "action", "queue", "jobs", "outcome", "short_detail")
    list_filter = ("action", "outcome", "queue", ("at", admin.DateFieldListFilter))
    search_fields = ("identity", "detail", "job_ids")
    search_help_text = "Who, detail text, or a job id."
    list_per_page = 100
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    readonly_fields = ("at", "user", "identity", "action", "queue", "job_ids", "outcome", "detail", "prefix")

    @admin.display(description="jobs")
    def jobs(self, obj):
        ids = obj.job_ids or []
        return ", ".join(ids[:3]) + (f" … (+{len(ids) - 3})" if len(ids) > 3 else "")

    @admin.display(description="detail")
    def short_detail(self, obj):
        return Truncator(obj.detail).chars(100)


class OutboxEntryAdmin(ReadOnlyModelAdmin):
    """Jobs accepted and not yet in Redis (queues/producer/outbox.py), this environment's: read only. A row
    that stays names why in ``last_error``; workers and ``manage.py queues_relay`` push them."""

    list_display = ("job_id", "queue", "created_at", "due_at", "push_attempts", "short_error", "claimed_until")
    list_filter = ("queue",)
    search_fields = ("job_id",)
    search_help_text = "A job id."
    list_per_page = 100
    show_full_result_count = False
    readonly_fields = (
        "job_id",
        "queue",
        "created_at",
        "due_at",
        "explicit_id",
        "unique_key",
        "push_attempts",
        "last_error",
        "claimed_by",
        "claimed_until",
        "prefix",
    )
    exclude = ("job",)  # the signed Redis hash, base64: nothing for a person to read

    def get_queryset(self, request):
        return super().get_queryset(request).filter(prefix=conf.prefix())

    @admin.display(description="last error")
    def short_error(self, obj):
        return Truncator(obj.last_error).chars(100)
