"""The dead-letter admin: list (filters, search, each row's failure group), detail, and the
retry, discard and cancel actions, one audit row per dead letter.

A row never verified (``unverified``, ``unsigned``: ``operations.NEVER_VERIFIED``) says so on its page
and is retried only from there, one at a time: the confirmation page shows its function and
arguments as not verified, and its form carries ``accept_unverified`` (the row's id); a bulk retry
skips such rows and says how many."""

import json

from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator
from django.utils.translation import ngettext
from django_rq.settings import get_queues_map

from queues import conf
from queues.admin.base import CONFIRM_SAMPLE, DONE, ActingModelAdmin, Tally, each_outcome
from queues.admin.filters import ExceptionFilter, FingerprintFilter, QueueFilter
from queues.catalog.lookup import OptimaJob
from queues.failures.corrupt import CORRUPT, decode_raw_hash
from queues.failures.operations import NEVER_VERIFIED, queue_connection
from queues.jobs.read import preview
from queues.models import FailureGroup

NOT_VERIFIED = (
    "Not verified: this job's function and arguments were not verified (it carried no valid signature "
    "when it was {reason}), so whoever could write to Redis may have written them. A retry signs and "
    "runs exactly these: it is offered only here, one row at a time, after a confirmation showing them."
)


class GroupedChangeList(ChangeList):
    """The dead-letter list, each row of the page given its ``group``: one query on the (prefix,
    fingerprint) index for the page's 100 rows. (Not a subquery annotation: PostgreSQL would compute
    it for every row an OFFSET skips too — 200,000 lookups on the last page.)"""

    def get_results(self, request):
        super().get_results(request)
        fingerprints = {row.fingerprint for row in self.result_list if row.fingerprint}
        groups = {
            g.fingerprint: g for g in FailureGroup.objects.filter(prefix=conf.prefix(), fingerprint__in=fingerprints)
        }
        for row in self.result_list:
            row.group = groups.get(row.fingerprint)


ONLY_IN_DATABASE = "only in the database"


class WhereFilter(admin.SimpleListFilter):
    """Rows whose job is gone from Redis (``only_in_database_since``, set by reconcile): the row is all that is
    left; a retry re-enqueues the job from it. Answered from the (prefix, status) index, then the few rows."""

    title = "where"
    parameter_name = "where"

    def lookups(self, request, model_admin):
        return [("database", ONLY_IN_DATABASE), ("redis", "in Redis too")]

    def queryset(self, request, queryset):
        if self.value() == "database":
            return queryset.filter(only_in_database_since__isnull=False)
        if self.value() == "redis":
            return queryset.filter(only_in_database_since__isnull=True)
        return queryset


class DeadLetterAdmin(ActingModelAdmin):
    list_display = (
        "job",
        "queue",
        "func_path",
        "exception",
        "message",
        "attempts",
        "dead_at",
        "status_shown",
        "times_dead",
    )
    list_display_links = ("job",)
    list_filter = (
        QueueFilter,
        "status",
        WhereFilter,
        ExceptionFilter,
        ("dead_at", admin.DateFieldListFilter),
        FingerprintFilter,
    )
    # On PostgreSQL each of these is answered from a trigram index (migration 0003); the exact job id
    # is looked up first, from the (prefix, job_id) index (get_search_results). SQLite: a scan.
    search_fields = ("func_path", "exc_message", "args", "kwargs")
    search_help_text = "Job id (exact), function path, message, or text in the arguments."
    list_per_page = 100
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER  # a count per filter choice would scan 200,000 rows
    actions = ["retry_selected", "discard_selected", "cancel_selected"]
    change_list_template = "admin/queues/deadletter/change_list.html"
    change_form_template = "admin/queues/deadletter/change_form.html"
    confirm_template = "admin/queues/deadletter/confirm_action.html"
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "job_id",
                    "queue",
                    "func_path",
                    "status_shown",
                    "times_dead",
                    "retried_as_link",
                    "job_link",
                    "only_in_database_since",
                )
            },
        ),
        (
            "Failure",
            {"fields": ("exc_type", "exc_message", "group_link", "reason", "attempts", "worker", "traceback_pre")},
        ),
        ("Arguments", {"fields": ("args_pretty", "kwargs_pretty")}),
        ("Times", {"fields": ("enqueued_at", "first_failed_at", "dead_at", "updated_at", "prefix")}),
    )

    # --- list ------------------------------------------------------------------------------------

    def get_queryset(self, request):
        return super().get_queryset(request).filter(prefix=conf.prefix()).defer("traceback")

    def get_changelist(self, request, **kwargs):
        return GroupedChangeList

    @admin.display(description="job id", ordering="job_id")
    def job(self, obj):
        # The whole id, wrapped in its cell (change_list.html): a shortened "schedule-orde…" names no job.
        return format_html('<span title="{}">{}</span>', obj.job_id, obj.job_id)

    @admin.display(description="exception / group", ordering="exc_type")
    def exception(self, obj):
        """The exception class and, under it, the row's failure group: "new group" at its first
        death, else "seen N times" (deaths of the group). In this column, not one of its own: the
        list's nine columns must fit beside the filters at 1400 px (tests/browser)."""
        name = format_html('<span title="{}">{}</span>', obj.exc_type, obj.exc_type.rsplit(".", 1)[-1])
        group = getattr(obj, "group", None)
        if group is None:
            return name
        count = group.count
        label = "new group" if count <= 1 else f"seen {count} times"
        url = reverse("admin:queues_failuregroup_change", args=[group.pk])
        return format_html(
            '{}<br><a class="queues-group{}" href="{}">{}</a>',
            name,
            " queues-group-new" if count <= 1 else "",
            url,
            label,
        )

    @admin.display(description="status", ordering="status")
    def status_shown(self, obj):
        """The status; an open row whose job is gone from Redis says it is held only in the database."""
        if obj.only_in_database_since is not None and obj.status == obj.Status.OPEN:
            return format_html(
                '{}<br><span class="queues-only-in-database" title="{}">{}</span>',
                obj.get_status_display(),
                "Its job is gone from Redis (found so by reconcile): this row is all that is left. "
                "A retry re-enqueues it from the row's function and arguments.",
                ONLY_IN_DATABASE,
            )
        return obj.get_status_display()

    @admin.display(description="message")
    def message(self, obj):
        return Truncator(obj.exc_message.replace("\n", " ")).chars(60)

    @admin.display(description="attempts", ordering="attempts_made")
    def attempts(self, obj):
        return f"{obj.attempts_made}/{obj.attempts_allowed}"

    def get_search_results(self, request, queryset, search_term):
        """An exact job id is answered from the (prefix, job_id) index; anything else searches the
        text columns (a scan)."""
        term = search_term.strip()
        if term and " " not in term and queryset.filter(job_id=term).exists():
            return queryset.filter(job_id=term), False
        return super().get_search_results(request, queryset, search_term)

    @admin.display(description="failure group")
    def group_link(self, obj):
        group = FailureGroup.objects.filter(prefix=obj.prefix, fingerprint=obj.fingerprint).first()
        if group is None:
            return "-"
        url = reverse("admin:queues_failuregroup_change", args=[group.pk])
        label = "new group" if group.count <= 1 else f"seen {group.count} times"
        return format_html('<a href="{}">{}</a> ({})', url, group, label)

    # --- detail ----------------------------------------------------------------------------------

    def get_fieldsets(self, request, obj=None):
        if obj is not None and obj.reason == CORRUPT:
            return self.fieldsets + (("Corrupt job: its Redis hash as it was", {"fields": ("raw_hash_preview",)}),)
        if obj is not None and obj.reason in NEVER_VERIFIED:
            found = "found in a failed registry" if obj.reason != "unsigned" else "refused by the worker"
            arguments = (
                "Arguments (not verified)",
                {**self.fieldsets[2][1], "description": NOT_VERIFIED.format(reason=found)},
            )
            kept = (
                (("Unverified job: its Redis hash as it was", {"fields": ("raw_hash_preview",)}),)
                if obj.raw_hash
                else ()
            )
            return (*self.fieldsets[:2], arguments, *self.fieldsets[3:], *kept)
        return self.fieldsets

    def get_readonly_fields(self, request, obj=None):
        return [f for fieldset in self.get_fieldsets(request, obj) for f in fieldset[1]["fields"]]

    @admin.display(description="raw hash")
    def raw_hash_preview(self, obj):
        """Each field of the corrupt job's hash, bytes that are not UTF-8 shown as ``\\xNN``, long values
        cut (``jobread.preview``): escaped text, never the raw bytes."""

        try:
            fields = decode_raw_hash(obj.raw_hash)
        except (ValueError, TypeError):
            return "(the stored raw hash cannot be decoded)"
        if not fields:
            return "-"
        rows = format_html_join("", "<tr><th><code>{}</code></th><td><pre>{}</pre></td></tr>", preview(fields))
        return format_html('<table class="queues-raw-hash">{}</table>', rows)

    @admin.display(description="arguments")
    def args_pretty(self, obj):
        return _pretty_json(obj.args)

    @admin.display(description="keyword arguments")
    def kwargs_pretty(self, obj):
        return _pretty_json(obj.kwargs)

    @admin.display(description="traceback")
    def traceback_pre(self, obj):
        return format_html('<pre class="queues-traceback">{}</pre>', obj.traceback or "-")

    @admin.display(description="job in the panel")
    def job_link(self, obj):
        return _panel_link(obj.queue, obj.job_id)

    @admin.display(description="retried as")
    def retried_as_link(self, obj):
        if not obj.retried_as:
            return "-"
        return _panel_link(obj.queue, obj.retried_as)

    # --- actions ---------------------------------------------------------------------------------

    @admin.action(permissions=["act"], description="Retry selected dead letters")
    def retry_selected(self, request, queryset):
        return self.confirm_or_run(request, queryset, "retry")

    @admin.action(permissions=["act"], description="Discard selected dead letters")
    def discard_selected(self, request, queryset):
        return self.confirm_or_run(request, queryset, "discard")

    @admin.action(permissions=["act"], description="Cancel the waiting retry of selected dead letters")
    def cancel_selected(self, request, queryset):
        return self.confirm_or_run(request, queryset, "cancel")

    def confirmation(self, queryset, action, single=None):
        count = queryset.count()
        context = {
            "title": f"{action.capitalize()} dead letters: are you sure?",
            "action_name": f"{action}_selected",
            "count": count,
            "more": max(0, count - CONFIRM_SAMPLE),
            "sample": list(queryset[:CONFIRM_SAMPLE]),
        }
        if action == "retry" and single is not None and single.reason in NEVER_VERIFIED:
            context.update(accept_unverified=True, unverified_call=_pretty_call(single))
        elif action == "retry":
            context["unverified"] = queryset.filter(reason__in=NEVER_VERIFIED).count()
        return context

    def single_options(self, request, obj, action):
        """A never verified row is retried only when its own confirmation page's form said so."""
        if action == "retry" and request.POST.get("accept_unverified") == str(obj.pk):
            return {"accept_unverified": True}
        return {}

    def run(self, request, queryset, action, **options):
        """Each dead letter through the operator service (one audit row each, naming the job that now runs when
        it is a new one), then the counts and the distinct reasons of the errors as messages."""
        tally = Tally()
        rows = queryset.values_list("pk", "queue", "job_id")
        for _queue, _job_id, result, raised in each_outcome(request, action, rows, **options):
            tally.add(result, reason=not raised)  # an exception is told by the audit trail only
        self._report(request, action, tally)
        return tally

    def _report(self, request, action, tally):
        done = DONE[action]
        if tally.ok:
            self.message_user(
                request,
                ngettext("%(n)d dead letter %(done)s.", "%(n)d dead letters %(done)s.", tally.ok)
                % {"n": tally.ok, "done": done},
                messages.SUCCESS,
            )
        skipped = tally.skipped - tally.unverified
        if skipped:
            why = "not retried: no retry to cancel" if action == "cancel" else "already retried, or not open"
            self.message_user(
                request,
                ngettext("%(n)d dead letter skipped (%(why)s).", "%(n)d dead letters skipped (%(why)s).", skipped)
                % {"n": skipped, "why": why},
                messages.WARNING,
            )
        if tally.unverified:
            self.message_user(
                request,
                ngettext(
                    "%(n)d dead letter not retried: its function and arguments were never verified (unverified or "
                    "unsigned). Retry it on its own from its page, which shows them.",
                    "%(n)d dead letters not retried: their function and arguments were never verified (unverified or "
                    "unsigned). Retry each on its own from its page, which shows them.",
                    tally.unverified,
                )
                % {"n": tally.unverified},
                messages.WARNING,
            )
        if tally.error:
            self.message_user(
                request,
                ngettext(
                    "%(n)d dead letter failed: see the audit trail.",
                    "%(n)d dead letters failed: see the audit trail.",
                    tally.error,
                )
                % {"n": tally.error},
                messages.ERROR,
            )
        for reason in tally.reasons[:3]:  # why, in the operator's words (distinct reasons, first three)
            self.message_user(request, reason, messages.ERROR)


def _pretty_call(row):
    """``func_path(args, kwargs)`` of a row as the text a confirmation page shows (escaped there)."""

    def dump(value):
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)

    return {"func_path": row.func_path, "args": dump(row.args), "kwargs": dump(row.kwargs)}


def _pretty_json(value):
    return format_html(
        '<pre class="queues-json">{}</pre>', json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    )


def _panel_link(queue, job_id):
    """A link to the job in the panel while Redis still has it."""

    try:
        exists = queue_connection(queue).exists(OptimaJob.key_for(job_id))  # on its queue's Redis server
    except Exception:
        return format_html("{} (Redis unavailable)", job_id)
    index = get_queues_map().get(queue)
    if not exists or index is None:
        return format_html("{} (no longer in Redis)", job_id)
    try:
        url = reverse("django_rq:job_detail", args=[index, job_id])
    except NoReverseMatch:
        return job_id
    return format_html('<a href="{}" class="queues-job-link">{} in the panel</a>', url, job_id)
