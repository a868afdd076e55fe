"""What the admins of this app share: read-only model admins, and the acting ones.

``ActingModelAdmin`` offers retry and discard of one object from its page (``<id>/retry/``,
``<id>/discard/``) and of a selection through the admin's actions, always after a confirmation
page. Every action ends in the operator service (``queues.operator``: the same permission check, audit row and
answers as the panel's and the API's): ``each_outcome`` names the service's action of each admin action
(``OPERATIONS``) and runs it on dead letters one at a time.
"""

from dataclasses import dataclass, field

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path

from queues.operator import actions as operator

ACT_PERM = "queues.act_on_deadletter"
CONFIRM_SAMPLE = 100  # objects listed on a confirmation page; the count covers the rest

OPERATIONS = {"retry": "retry", "discard": "discard", "cancel": "cancel_retry"}  # admin action -> service action
DONE = {"retry": "retried", "discard": "discarded", "cancel": "canceled (their retry)"}
EXPLAIN = {
    "retry": "A job still in its queue's failed registry is requeued as it is (same id, attempts counted "
    "afresh); otherwise a new job is enqueued from the stored function and arguments, and the dead "
    "letter is linked to it.",
    "discard": "The job is removed from the failed registry and deleted from Redis. The dead letter stays, "
    "marked discarded, and can still be retried from its stored arguments.",
    "cancel": "The job a retry put back (still queued or scheduled, not yet started) is canceled: it never runs. "
    "The dead letter is marked discarded and can still be retried from its stored arguments.",
}


def each_outcome(request, action, rows, *, audit=True, **options):
    """``action`` through the operator service on each dead letter of ``rows`` (a ``values_list("pk", "queue",
    "job_id")``), one at a time, confirmed (the admin's confirmation page was answered), with ``options``
    (``accept_unverified``: the one-row retry only): yields (queue, job_id, Result, raised). The service writes
    one audit row per dead letter (unless ``audit`` is False: a failure group writes one for its rows). One
    row that raises does not stop the rest: it is its own "refused" answer, ``raised`` True."""
    name = OPERATIONS[action]
    audit_as = None if audit else (lambda outcome: None)
    for target in rows.iterator(chunk_size=500):
        result = operator.one(request, name, target, confirmed=True, audit_as=audit_as, **options)
        yield target[1], target[2], result, bool(result.data.get("raised"))


@dataclass
class Tally:
    """Outcomes of an action counted, and the distinct details of its errors in the order met
    (in the operator's words, e.g. the masked Redis URL that refused)."""

    ok: int = 0
    skipped: int = 0
    error: int = 0
    unverified: int = 0  # of the skipped: rows never verified, left to a one-row retry
    reasons: list = field(default_factory=list)

    def add(self, result, reason=True):
        setattr(self, result.outcome, getattr(self, result.outcome) + 1)
        self.unverified += result.outcome == "skipped" and result.unverified
        if reason and result.outcome == "error":
            self.note(result.detail)

    def note(self, *reasons):
        self.reasons.extend(r for r in dict.fromkeys(reasons) if r not in self.reasons)

    def __iadd__(self, other):
        self.ok, self.skipped, self.error = self.ok + other.ok, self.skipped + other.skipped, self.error + other.error
        self.unverified += other.unverified
        self.note(*other.reasons)
        return self

    @property
    def total(self):
        return self.ok + self.skipped + self.error


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
    confirmation on GET, the action on POST), for those with the act permission, and of a selection
    through the bulk actions (``confirm_or_run``). Subclasses say what the confirmation page shows
    (``confirm_template``, ``confirmation``) and run the action (``run``)."""

    confirm_template: str | None = None

    def has_act_permission(self, request):
        return request.user.has_perm(ACT_PERM)

    def get_urls(self):
        app_label, model_name = self.model._meta.app_label, self.model._meta.model_name
        return [
            path(
                "<path:object_id>/retry/",
                self.admin_site.admin_view(self.single_action_view),
                {"action": "retry"},
                name=f"{app_label}_{model_name}_retry",
            ),
            path(
                "<path:object_id>/discard/",
                self.admin_site.admin_view(self.single_action_view),
                {"action": "discard"},
                name=f"{app_label}_{model_name}_discard",
            ),
        ] + super().get_urls()

    def single_action_view(self, request, object_id, action):
        if not (self.has_view_permission(request) and self.has_act_permission(request)):
            raise PermissionDenied
        obj = get_object_or_404(self.get_queryset(request), pk=object_id)
        queryset = self.get_queryset(request).filter(pk=obj.pk)
        if request.method == "POST":
            self.run(request, queryset, action, **self.single_options(request, obj, action))
            return redirect(f"admin:{self.model._meta.app_label}_{self.model._meta.model_name}_change", obj.pk)
        return self.confirm_or_run(request, queryset, action, single=obj)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra = {"can_act": self.has_act_permission(request)}
        extra.update(extra_context or {})
        return super().change_view(request, object_id, form_url, extra)

    def confirm_or_run(self, request, queryset, action, single=None):
        """The bulk actions: run once confirmed (``post=yes``), else the confirmation page."""
        if request.POST.get("post") == "yes":
            self.run(request, queryset, action)
            return None
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "action": action,
            "selected": [] if single else request.POST.getlist(admin.helpers.ACTION_CHECKBOX_NAME),
            "select_across": request.POST.get("select_across") == "1",
            "single": single,
            "explanation": EXPLAIN[action],
            **self.confirmation(queryset, action, single=single),
        }
        return TemplateResponse(request, self.confirm_template, context)

    def single_options(self, request, obj, action):
        """The operation's options of a one-object action POSTed from its confirmation page."""
        return {}

    def confirmation(self, queryset, action, single=None):
        """What the confirmation page of ``action`` on ``queryset`` (``single``: the one object of its
        own page's action) shows: title, counts, sample."""
        raise NotImplementedError

    def run(self, request, queryset, action, **options):
        """Run ``action`` on ``queryset`` (through ``each_outcome``, with ``options``): audit rows,
        then messages."""
        raise NotImplementedError
