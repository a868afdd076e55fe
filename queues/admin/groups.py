"""The failure-group admin: one group per fingerprint (docs/operator.md "Failure groups"), read
only; from a group, its rows (the dead-letter list filtered by ``?fingerprint=``), and retry or
discard of its open rows, each through the operator service's dead-letter action (its permission, confirmation
and answers), one audit row per group."""

from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.translation import ngettext

from queues import audit, conf
from queues.admin.base import CONFIRM_SAMPLE, DONE, ActingModelAdmin, Tally, each_outcome
from queues.failures import fingerprint
from queues.failures.operations import NEVER_VERIFIED
from queues.models import DeadLetter


class FailureGroupAdmin(ActingModelAdmin):
    """Failure groups: seen by whoever sees dead letters; their open rows retried or discarded by
    whoever may act on dead letters, after a confirmation page, one audit row per group."""

    list_display = (
        "summary",
        "func_path",
        "count",
        "first_seen",
        "last_seen",
        "queue_list",
        "example_link",
        "rows_link",
    )
    list_display_links = ("summary",)
    search_fields = ("func_path", "exc_type", "pattern")
    search_help_text = "Function path, exception class, or text of the normalised message."
    list_per_page = 100
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    actions = ["retry_groups", "discard_groups"]
    change_form_template = "admin/queues/failuregroup/change_form.html"
    confirm_template = "admin/queues/failuregroup/confirm_action.html"
    fields = (
        "summary",
        "fingerprint",
        "func_path",
        "exc_type",
        "pattern",
        "example_message",
        "count",
        "first_seen",
        "last_seen",
        "queue_list",
        "example_link",
        "rows_link",
        "open_rows",
    )
    readonly_fields = fields

    def get_queryset(self, request):
        return super().get_queryset(request).filter(prefix=conf.prefix())

    def has_view_permission(self, request, obj=None):
        return request.user.has_perm("queues.view_deadletter") or super().has_view_permission(request, obj)

    @admin.display(description="failure", ordering="exc_type")
    def summary(self, obj):
        return format_html('<span title="{}">{}</span>', obj.exc_type, fingerprint.title(obj.exc_type, obj.pattern))

    @admin.display(description="queues")
    def queue_list(self, obj):
        return ", ".join(obj.queues or [])

    @admin.display(description="example")
    def example_link(self, obj):
        if obj.example_id is None:
            return "-"
        url = reverse("admin:queues_deadletter_change", args=[obj.example_id])
        return format_html(
            '<a href="{}" class="queues-group-example" title="{}">{}</a>',
            url,
            obj.example_message,
            Truncator(obj.example_message.replace("\n", " ")).chars(40) or "(no message)",
        )

    @admin.display(description="rows")
    def rows_link(self, obj):
        url = reverse("admin:queues_deadletter_changelist") + f"?fingerprint={obj.fingerprint}"
        return format_html('<a href="{}" class="queues-group-rows">dead letters</a>', url)

    @admin.display(description="open dead letters")
    def open_rows(self, obj):
        return open_rows(obj).count()

    # --- actions ---------------------------------------------------------------------------------

    @admin.action(permissions=["act"], description="Retry the open dead letters of the selected groups")
    def retry_groups(self, request, queryset):
        return self.confirm_or_run(request, queryset, "retry")

    @admin.action(permissions=["act"], description="Discard the open dead letters of the selected groups")
    def discard_groups(self, request, queryset):
        return self.confirm_or_run(request, queryset, "discard")

    def confirmation(self, queryset, action, single=None):
        groups = list(queryset[:CONFIRM_SAMPLE])
        for group in groups:
            group.open_count = open_rows(group).count()
        count = queryset.count()
        return {
            "title": f"{action.capitalize()} failure groups: are you sure?",
            "action_name": f"{action}_groups",
            "count": count,
            "rows": sum(group.open_count for group in groups),
            "unverified": sum(open_rows(group).filter(reason__in=NEVER_VERIFIED).count() for group in groups)
            if action == "retry"
            else 0,
            "more": max(0, count - CONFIRM_SAMPLE),
            "groups": groups,
        }

    def run(self, request, queryset, action, **options):
        """Each group's open rows through the one-row operation (so a row's own rules hold: a corrupt
        one is not retried, one never verified is skipped: a group's retry never accepts it), then one
        audit row for the group naming its fingerprint and counts. ``options`` are not passed on."""
        totals, n = Tally(), 0
        for group in queryset.iterator(chunk_size=100):
            tally, job_ids = Tally(), []
            rows = open_rows(group).values_list("pk", "queue", "job_id")
            for _, job_id, result, _ in each_outcome(request, action, rows, audit=False):
                tally.add(result)
                job_ids.append(job_id)
            _audit_group(request, action, group, tally, job_ids)
            totals += tally
            n += 1
        self.message_user(
            request,
            ngettext(
                "%(rows)d dead letters %(done)s in %(n)d failure group (%(skipped)d skipped, %(error)d failed).",
                "%(rows)d dead letters %(done)s in %(n)d failure groups (%(skipped)d skipped, %(error)d failed).",
                n,
            )
            % {"rows": totals.ok, "done": DONE[action], "n": n, "skipped": totals.skipped, "error": totals.error},
            messages.ERROR if totals.error else messages.SUCCESS,
        )
        if totals.unverified:
            self.message_user(
                request,
                ngettext(
                    "%(n)d dead letter skipped: never verified (unverified or unsigned); retry it on its own from "
                    "its page.",
                    "%(n)d dead letters skipped: never verified (unverified or unsigned); retry each on its own from "
                    "its page.",
                    totals.unverified,
                )
                % {"n": totals.unverified},
                messages.WARNING,
            )
        for reason in totals.reasons[:3]:
            self.message_user(request, reason, messages.ERROR)
        return totals


def _audit_group(request, action, group, tally, job_ids):
    total = tally.total
    outcome = "ok" if tally.ok == total else "error" if tally.error == total and total else "partial"
    detail = (
        f"failure group {group.fingerprint} ({group.exc_type} in {group.func_path}): "
        f"{total} open dead letters, {tally.ok} {DONE[action]}, {tally.skipped} skipped, "
        f"{tally.error} failed"
    )
    if tally.unverified:
        detail += f" ({tally.unverified} never verified: retry each on its own page)"
    queue = group.queues[0] if len(group.queues or []) == 1 else ""
    audit.record(request, f"{action}_group", queue, job_ids, outcome, detail)


def open_rows(group):
    """The open dead letters of ``group`` (the (fingerprint, prefix, -dead_at) index)."""
    return DeadLetter.objects.filter(prefix=group.prefix, fingerprint=group.fingerprint, status=DeadLetter.Status.OPEN)
