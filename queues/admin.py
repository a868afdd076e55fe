"""Admin of dead letters (view, search, retry, discard) and of the audit trail (read only).

Permissions: seeing dead letters is Django's ``queues.view_deadletter``; retrying and discarding
is ``queues.act_on_deadletter``. A corrupt dead letter (reason ``corrupt``) shows its job's raw hash,
escaped; retrying it is refused (nothing to run), discarding it works like any other. Rows are
never deleted here: a discarded dead letter stays,
marked ``discarded``. Every retry or discard writes one audit row per dead letter. Lists stay
fast with 200,000 rows: no full count, indexed filters, 100 rows a page.

Failure groups (``FailureGroup``, one per fingerprint: docs/operator.md "Failure groups") have their
own read-only list; from a group, its rows (the dead-letter list filtered by ``?fingerprint=``),
and retry or discard of its open rows (``queues.act_on_deadletter``, confirmed first), each row
through ``retry_dead_letter``/``discard_dead_letter``, one audit row per group.
"""
import json

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.contrib.admin.views.main import ChangeList
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator
from django.utils.translation import ngettext

from queues import audit, conf

from queues.board import throttle
from queues.failures.deadletter import CORRUPT
from queues.models import AuditEntry, DeadLetter, FailureGroup, OutboxEntry

ACT_PERM = "queues.act_on_deadletter"
CONFIRM_SAMPLE = 100  # objects listed on a confirmation page; the count covers the rest


class QueueFilter(admin.SimpleListFilter):
    """Queues as declared (no DISTINCT over the table)."""

    title = "queue"
    parameter_name = "queue"

    def lookups(self, request, model_admin):
        from queues.catalog.lookup import queue_names

        return [(name, name) for name in queue_names()]

    def queryset(self, request, queryset):
        return queryset.filter(queue=self.value()) if self.value() else queryset


class ExceptionFilter(admin.SimpleListFilter):
    """The exception classes present (at most 50, from the exc_type index)."""

    title = "exception class"
    parameter_name = "exc_type"

    def lookups(self, request, model_admin):
        # Straight off the exc_type index (no prefix filter, which would mean a table scan): a class
        # seen only in another environment's rows just filters down to nothing here.
        types = DeadLetter.objects.order_by("exc_type").values_list("exc_type", flat=True).distinct()[:50]
        return [(t, t.rsplit(".", 1)[-1] or "(none)") for t in types]

    def queryset(self, request, queryset):
        return queryset.filter(exc_type=self.value()) if self.value() is not None else queryset


class FingerprintFilter(admin.SimpleListFilter):
    """The rows of one failure group (``?fingerprint=``, the group's "rows" link). Nothing in the
    sidebar until it is set: listing every group there would not scale."""

    title = "failure group"
    parameter_name = "fingerprint"

    def lookups(self, request, model_admin):
        value = self.value()
        if not value:
            return []
        group = FailureGroup.objects.filter(prefix=conf.prefix(), fingerprint=value).first()
        return [(value, str(group) if group else value)]

    def queryset(self, request, queryset):
        return queryset.filter(fingerprint=self.value()) if self.value() else queryset


class GroupedChangeList(ChangeList):
    """The dead-letter list, each row of the page given its ``group``: one query on the (prefix,
    fingerprint) index for the page's 100 rows. (Not a subquery annotation: PostgreSQL would compute
    it for every row an OFFSET skips too — 200,000 lookups on the last page.)"""

    def get_results(self, request):
        super().get_results(request)
        fingerprints = {row.fingerprint for row in self.result_list if row.fingerprint}
        groups = {g.fingerprint: g for g in FailureGroup.objects.filter(prefix=conf.prefix(),
                                                                        fingerprint__in=fingerprints)}
        for row in self.result_list:
            row.group = groups.get(row.fingerprint)


def _pretty_json(value):
    return format_html("<pre class=\"queues-json\">{}</pre>", json.dumps(value, indent=2, ensure_ascii=False,
                                                                       sort_keys=True))


class ReadOnlyModelAdmin(admin.ModelAdmin):
    """Rows written by the system, never edited in the admin: operators act through actions."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ActingModelAdmin(ReadOnlyModelAdmin):
    """Retry and discard of one object from its page (``<id>/retry/``, ``<id>/discard/``: a
    confirmation on GET, the action on POST), for those with the act permission. Subclasses run
    the action in ``act_on_one`` and offer the bulk actions through ``_confirm_or_run``."""

    def has_act_permission(self, request):
        return request.user.has_perm(ACT_PERM)

    def get_urls(self):
        info = self.model._meta.app_label, self.model._meta.model_name
        return [
            path("<path:object_id>/retry/", self.admin_site.admin_view(self.single_action_view),
                 {"action": "retry"}, name="%s_%s_retry" % info),
            path("<path:object_id>/discard/", self.admin_site.admin_view(self.single_action_view),
                 {"action": "discard"}, name="%s_%s_discard" % info),
        ] + super().get_urls()

    def single_action_view(self, request, object_id, action):
        if not (self.has_view_permission(request) and self.has_act_permission(request)):
            raise PermissionDenied
        obj = get_object_or_404(self.get_queryset(request), pk=object_id)
        queryset = self.get_queryset(request).filter(pk=obj.pk)
        if request.method == "POST":
            self.act_on_one(request, queryset, action)
            return redirect(f"admin:{self.model._meta.app_label}_{self.model._meta.model_name}_change", obj.pk)
        return self._confirm_or_run(request, queryset, action, single=obj)

    def act_on_one(self, request, queryset, action):
        raise NotImplementedError

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra = {"can_act": self.has_act_permission(request)}
        extra.update(extra_context or {})
        return super().change_view(request, object_id, form_url, extra)


@admin.register(DeadLetter)
class DeadLetterAdmin(ActingModelAdmin):
    list_display = ("job", "queue", "func_path", "exception", "message", "attempts", "dead_at", "status",
                    "times_dead")
    list_display_links = ("job",)
    list_filter = (QueueFilter, "status", ExceptionFilter, ("dead_at", admin.DateFieldListFilter), FingerprintFilter)
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
    fieldsets = (
        (None, {"fields": ("job_id", "queue", "func_path", "status", "times_dead", "retried_as_link", "job_link")}),
        ("Failure", {"fields": ("exc_type", "exc_message", "group_link", "reason", "attempts", "worker",
                                "traceback_pre")}),
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
        return format_html('<span title="{}">{}</span>', obj.job_id, Truncator(obj.job_id).chars(14))

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
        return format_html('{}<br><a class="queues-group{}" href="{}">{}</a>', name,
                           " queues-group-new" if count <= 1 else "", url, label)

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
        return self.fieldsets

    def get_readonly_fields(self, request, obj=None):
        return [f for fieldset in self.get_fieldsets(request, obj) for f in fieldset[1]["fields"]]

    @admin.display(description="raw hash")
    def raw_hash_preview(self, obj):
        """Each field of the corrupt job's hash, bytes that are not UTF-8 shown as ``\\xNN``, long values
        cut (``jobread.preview``): escaped text, never the raw bytes."""
        from queues.jobs.read import preview
        from queues.failures.deadletter import decode_raw_hash

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
        return format_html("<pre class=\"queues-traceback\">{}</pre>", obj.traceback or "-")

    @admin.display(description="job in the panel")
    def job_link(self, obj):
        return _panel_link(obj.queue, obj.job_id)

    @admin.display(description="retried as")
    def retried_as_link(self, obj):
        if not obj.retried_as:
            return "-"
        return _panel_link(obj.queue, obj.retried_as)

    # --- permissions -----------------------------------------------------------------------------


    # --- actions ---------------------------------------------------------------------------------

    @admin.action(permissions=["act"], description="Retry selected dead letters")
    def retry_selected(self, request, queryset):
        return self._confirm_or_run(request, queryset, "retry")

    @admin.action(permissions=["act"], description="Discard selected dead letters")
    def discard_selected(self, request, queryset):
        return self._confirm_or_run(request, queryset, "discard")

    @admin.action(permissions=["act"], description="Cancel the waiting retry of selected dead letters")
    def cancel_selected(self, request, queryset):
        return self._confirm_or_run(request, queryset, "cancel")

    def _confirm_or_run(self, request, queryset, action, single=None):
        if request.POST.get("post") == "yes":
            counts = self._run(request, queryset.values_list("pk", "queue", "job_id"), action)
            self._report(request, action, counts)
            return None
        count = queryset.count()
        context = {
            **self.admin_site.each_context(request),
            "title": f"{action.capitalize()} dead letters: are you sure?",
            "opts": self.model._meta,
            "action": action,
            "action_name": f"{action}_selected",
            "count": count,
            "more": max(0, count - CONFIRM_SAMPLE),
            "sample": list(queryset[:CONFIRM_SAMPLE]),
            "selected": [] if single else request.POST.getlist(admin.helpers.ACTION_CHECKBOX_NAME),
            "select_across": request.POST.get("select_across") == "1",
            "single": single,
            "explanation": _EXPLAIN[action],
        }
        return TemplateResponse(request, "admin/queues/deadletter/confirm_action.html", context)

    def _run(self, request, rows, action):
        from queues.failures.operations import cancel_retry, discard_dead_letter, retry_dead_letter

        op = {"retry": retry_dead_letter, "discard": discard_dead_letter, "cancel": cancel_retry}[action]
        counts = {"ok": 0, "skipped": 0, "error": 0, "reasons": []}
        for pk, queue, job_id in rows.iterator(chunk_size=500):
            try:
                result = op(pk)
            except Exception as exc:  # one bad row must not stop the rest; it is audited as an error
                counts["error"] += 1
                audit.record(request, action, queue, [job_id], "error", f"{type(exc).__name__}: {exc}")
                continue
            counts[result.outcome] += 1
            if result.outcome == "error" and result.detail not in counts["reasons"]:
                counts["reasons"].append(result.detail)  # e.g. the masked Redis URL that refused
            ids = [job_id] if not result.job_id or result.job_id == job_id else [job_id, result.job_id]
            outcome = "ok" if result.outcome == "ok" else "error" if result.outcome == "error" else "partial"
            audit.record(request, action, queue, ids, outcome, result.detail)
        return counts

    def _report(self, request, action, counts):
        done = {"retry": "retried", "discard": "discarded", "cancel": "canceled (their retry)"}[action]
        if counts["ok"]:
            self.message_user(request, ngettext("%(n)d dead letter %(done)s.", "%(n)d dead letters %(done)s.",
                                                counts["ok"]) % {"n": counts["ok"], "done": done}, messages.SUCCESS)
        if counts["skipped"]:
            why = "not retried: no retry to cancel" if action == "cancel" else "already retried, or not open"
            self.message_user(request, ngettext(
                "%(n)d dead letter skipped (%(why)s).", "%(n)d dead letters skipped (%(why)s).", counts["skipped"])
                % {"n": counts["skipped"], "why": why}, messages.WARNING)
        if counts["error"]:
            self.message_user(request, ngettext("%(n)d dead letter failed: see the audit trail.",
                                                "%(n)d dead letters failed: see the audit trail.", counts["error"])
                              % {"n": counts["error"]}, messages.ERROR)
        for reason in counts["reasons"][:3]:  # why, in the operator's words (distinct reasons, first three)
            self.message_user(request, reason, messages.ERROR)

    # --- single-object actions from the detail page (ActingModelAdmin) --------------------------

    def act_on_one(self, request, queryset, action):
        self._report(request, action, self._run(request, queryset.values_list("pk", "queue", "job_id"), action))


_EXPLAIN = {
    "retry": "A job still in its queue's failed registry is requeued as it is (same id, attempts counted "
             "afresh); otherwise a new job is enqueued from the stored function and arguments, and the dead "
             "letter is linked to it.",
    "discard": "The job is removed from the failed registry and deleted from Redis. The dead letter stays, "
               "marked discarded, and can still be retried from its stored arguments.",
    "cancel": "The job a retry put back (still queued or scheduled, not yet started) is canceled: it never runs. "
              "The dead letter is marked discarded and can still be retried from its stored arguments.",
}


def _panel_link(queue, job_id):
    """A link to the job in the panel while Redis still has it."""
    from django_rq.settings import get_queues_map

    from queues.connection.clients import get_connection
    from queues.catalog.lookup import OptimaJob

    try:
        exists = get_connection().exists(OptimaJob.key_for(job_id))
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


@admin.register(FailureGroup)
class FailureGroupAdmin(ActingModelAdmin):
    """Failure groups: seen by whoever sees dead letters; their open rows retried or discarded by
    whoever may act on dead letters, after a confirmation page, one audit row per group."""

    list_display = ("summary", "func_path", "count", "first_seen", "last_seen", "queue_list", "example_link",
                    "rows_link")
    list_display_links = ("summary",)
    search_fields = ("func_path", "exc_type", "pattern")
    search_help_text = "Function path, exception class, or text of the normalised message."
    list_per_page = 100
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    actions = ["retry_groups", "discard_groups"]
    change_form_template = "admin/queues/failuregroup/change_form.html"
    fields = ("summary", "fingerprint", "func_path", "exc_type", "pattern", "example_message", "count",
              "first_seen", "last_seen", "queue_list", "example_link", "rows_link", "open_rows")
    readonly_fields = fields

    def get_queryset(self, request):
        return super().get_queryset(request).filter(prefix=conf.prefix())

    def has_view_permission(self, request, obj=None):
        return request.user.has_perm("queues.view_deadletter") or super().has_view_permission(request, obj)


    @admin.display(description="failure", ordering="exc_type")
    def summary(self, obj):
        return format_html('<span title="{}">{}</span>: {}', obj.exc_type, obj.exc_type.rsplit(".", 1)[-1] or "-",
                           Truncator(obj.pattern.replace("\n", " ")).chars(80))

    @admin.display(description="queues")
    def queue_list(self, obj):
        return ", ".join(obj.queues or [])

    @admin.display(description="example")
    def example_link(self, obj):
        if obj.example_id is None:
            return "-"
        url = reverse("admin:queues_deadletter_change", args=[obj.example_id])
        return format_html('<a href="{}" class="queues-group-example" title="{}">{}</a>', url, obj.example_message,
                           Truncator(obj.example_message.replace("\n", " ")).chars(40) or "(no message)")

    @admin.display(description="rows")
    def rows_link(self, obj):
        url = reverse("admin:queues_deadletter_changelist") + f"?fingerprint={obj.fingerprint}"
        return format_html('<a href="{}" class="queues-group-rows">dead letters</a>', url)

    @admin.display(description="open dead letters")
    def open_rows(self, obj):
        return _open_rows(obj).count()

    # --- actions ---------------------------------------------------------------------------------

    @admin.action(permissions=["act"], description="Retry the open dead letters of the selected groups")
    def retry_groups(self, request, queryset):
        return self._confirm_or_run(request, queryset, "retry")

    @admin.action(permissions=["act"], description="Discard the open dead letters of the selected groups")
    def discard_groups(self, request, queryset):
        return self._confirm_or_run(request, queryset, "discard")

    def _confirm_or_run(self, request, queryset, action, single=None):
        if request.POST.get("post") == "yes":
            self._run(request, queryset, action)
            return None
        groups = list(queryset[:CONFIRM_SAMPLE])
        for group in groups:
            group.open_count = _open_rows(group).count()
        context = {
            **self.admin_site.each_context(request),
            "title": f"{action.capitalize()} failure groups: are you sure?",
            "opts": self.model._meta,
            "action": action,
            "action_name": f"{action}_groups",
            "count": queryset.count(),
            "rows": sum(group.open_count for group in groups),
            "more": max(0, queryset.count() - CONFIRM_SAMPLE),
            "groups": groups,
            "selected": [] if single else request.POST.getlist(admin.helpers.ACTION_CHECKBOX_NAME),
            "select_across": request.POST.get("select_across") == "1",
            "single": single,
            "explanation": _EXPLAIN[action],
        }
        return TemplateResponse(request, "admin/queues/failuregroup/confirm_action.html", context)

    def _run(self, request, queryset, action):
        """Each group's open rows through the one-row operation (so a row's own rules hold: a corrupt
        one is not retried, ...), then one audit row for the group naming its fingerprint and counts."""
        from queues.failures.operations import cancel_retry, discard_dead_letter, retry_dead_letter

        op = {"retry": retry_dead_letter, "discard": discard_dead_letter, "cancel": cancel_retry}[action]
        done = {"retry": "retried", "discard": "discarded", "cancel": "canceled (their retry)"}[action]
        totals = {"ok": 0, "skipped": 0, "error": 0, "groups": 0}
        reasons = []
        for group in queryset.iterator(chunk_size=100):
            counts = {"ok": 0, "skipped": 0, "error": 0}
            job_ids = []
            for pk, job_id in _open_rows(group).values_list("pk", "job_id").iterator(chunk_size=500):
                try:
                    result = op(pk)
                    outcome, detail = result.outcome, result.detail
                except Exception as exc:  # one bad row must not stop the rest; counted and named below
                    outcome, detail = "error", f"{type(exc).__name__}: {exc}"
                counts[outcome] += 1
                job_ids.append(job_id)
                if outcome == "error" and detail not in reasons:
                    reasons.append(detail)
            total = sum(counts.values())
            outcome = ("ok" if counts["ok"] == total else "error" if counts["error"] == total and total
                       else "partial")
            detail = (f"failure group {group.fingerprint} ({group.exc_type} in {group.func_path}): "
                      f"{total} open dead letters, {counts['ok']} {done}, {counts['skipped']} skipped, "
                      f"{counts['error']} failed")
            queue = group.queues[0] if len(group.queues or []) == 1 else ""
            audit.record(request, f"{action}_group", queue, job_ids, outcome, detail)
            totals["groups"] += 1
            for key in ("ok", "skipped", "error"):
                totals[key] += counts[key]
        n = totals["groups"]
        self.message_user(request, ngettext(
            "%(rows)d dead letters %(done)s in %(n)d failure group (%(skipped)d skipped, %(error)d failed).",
            "%(rows)d dead letters %(done)s in %(n)d failure groups (%(skipped)d skipped, %(error)d failed).", n)
            % {"rows": totals["ok"], "done": done, "n": n, "skipped": totals["skipped"], "error": totals["error"]},
            messages.ERROR if totals["error"] else messages.SUCCESS)
        for reason in reasons[:3]:
            self.message_user(request, reason, messages.ERROR)
        return totals

    # --- the actions from a group's page (ActingModelAdmin) -------------------------------------

    def act_on_one(self, request, queryset, action):
        self._run(request, queryset, action)


def _open_rows(group):
    """The open dead letters of ``group`` (the (fingerprint, prefix, -dead_at) index)."""
    return DeadLetter.objects.filter(prefix=group.prefix, fingerprint=group.fingerprint,
                                     status=DeadLetter.Status.OPEN)


@admin.register(AuditEntry)
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


@admin.register(OutboxEntry)
class OutboxEntryAdmin(ReadOnlyModelAdmin):
    """Jobs accepted and not yet in Redis (queues/producer/outbox.py), this environment's: read only. A row
    that stays names why in ``last_error``; workers and ``manage.py queues_relay`` push them."""

    list_display = ("job_id", "queue", "created_at", "due_at", "push_attempts", "short_error", "claimed_until")
    list_filter = ("queue",)
    search_fields = ("job_id",)
    search_help_text = "A job id."
    list_per_page = 100
    show_full_result_count = False
    readonly_fields = ("job_id", "queue", "created_at", "due_at", "explicit_id", "unique_key", "push_attempts",
                       "last_error", "claimed_by", "claimed_until", "prefix")
    exclude = ("job",)  # the signed Redis hash, base64: nothing for a person to read

    def get_queryset(self, request):
        return super().get_queryset(request).filter(prefix=conf.prefix())

    @admin.display(description="last error")
    def short_error(self, obj):
        return Truncator(obj.last_error).chars(100)


# The admin login form counts failed sign-ins per client address and answers 429 past
# QUEUE_LOGIN_FAILURES (queues/board/throttle.py). Done here, before admin.site.urls is built.
throttle.protect_admin_login(admin.site)
