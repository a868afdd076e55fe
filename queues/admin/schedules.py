"""The admin of the schedules stored in the database (``queues.models.StoredSchedule``).

An operator adds a schedule, or overrides one declared in settings or an app's ``SCHEDULES`` by giving its
id (the fields left blank keep the declared values): pause it (``enabled`` off), move it (a ``cron`` and a
``tz``). The form is validated as a declaration is (``queues.periodic.stored.problems_of``, the validators
of the system checks: ``validation.validate_entry``), each error on its field. Every add, change and delete
writes one audit row. The running ``rqscheduler`` picks the change up within one poll
(``queues.periodic.run.PeriodicScheduler.in_force``).

Permissions: Django's own ``add``/``change``/``delete``/``view_storedschedule``.
"""

from django import forms
from django.contrib import admin

from queues import audit, conf
from queues.models import StoredSchedule
from queues.periodic import stored
from queues.periodic.declare import declared_entries

FIELD_OF = {"id": "schedule_id"}  # a declaration's key -> the form's field, where the names differ


class StoredScheduleForm(forms.ModelForm):
    class Meta:
        model = StoredSchedule
        fields = (
            "schedule_id",
            "enabled",
            "queue",
            "func",
            "args",
            "kwargs",
            "cron",
            "interval",
            "tz",
            "missed",
            "catch_up",
            "attempts",
            "timeout",
        )

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        cleaned["args"] = [] if cleaned.get("args") is None else cleaned["args"]
        cleaned["kwargs"] = {} if cleaned.get("kwargs") is None else cleaned["kwargs"]
        row = StoredSchedule(prefix=conf.prefix(), **{k: v for k, v in cleaned.items() if k in self.Meta.fields})
        taken = StoredSchedule.objects.filter(prefix=conf.prefix(), schedule_id=row.schedule_id)
        if self.instance.pk:
            taken = taken.exclude(pk=self.instance.pk)
        if taken.exists():
            self.add_error("schedule_id", f"A stored schedule {row.schedule_id!r} exists already: edit that one.")
        for key, problem in stored.problems_of(row):
            field = FIELD_OF.get(key, key)
            message = f"{problem.msg} {problem.hint}".strip()
            self.add_error(field if field in self.fields else None, message)
        return cleaned


def _describe(obj):
    declared = obj.schedule_id in declared_entries()
    timing = f"cron {obj.cron!r}" if obj.cron else (f"every {obj.interval} s" if obj.interval else "declared timing")
    return (
        f"stored schedule {obj.schedule_id}{' (over the declared one)' if declared else ''}: {timing}"
        f"{f' in {obj.tz}' if obj.tz else ''}, {'enabled' if obj.enabled else 'paused (disabled)'}"
    )


class StoredScheduleAdmin(admin.ModelAdmin):
    form = StoredScheduleForm
    list_display = ("schedule_id", "overrides", "queue", "func", "timing", "tz", "enabled", "updated_at")
    list_filter = ("enabled", "queue")
    search_fields = ("schedule_id", "func")
    list_per_page = 100
    fieldsets = (
        (None, {"fields": ("schedule_id", "enabled")}),
        (
            "What runs (blank: the declared schedule's)",
            {"fields": ("queue", "func", "args", "kwargs", "attempts", "timeout")},
        ),
        ("When (blank: the declared schedule's)", {"fields": ("cron", "interval", "tz", "missed", "catch_up")}),
    )

    def get_queryset(self, request):
        return super().get_queryset(request).filter(prefix=conf.prefix())

    @admin.display(description="over a declared schedule", boolean=True)
    def overrides(self, obj):
        return obj.schedule_id in declared_entries()

    @admin.display(description="timing")
    def timing(self, obj):
        return obj.cron or (f"every {obj.interval} s" if obj.interval else "(declared)")

    def save_model(self, request, obj, form, change):
        obj.prefix = conf.prefix()
        super().save_model(request, obj, form, change)
        # the form's own list names a JSON field posted as it was ("[]" against []): compare the values
        names = [f for f in form.changed_data if form.initial.get(f) != form.cleaned_data.get(f)]
        changed = f" (changed: {', '.join(names)})" if change and names else ""
        audit.record(
            request, "change-schedule" if change else "add-schedule", obj.queue, detail=_describe(obj) + changed
        )

    def delete_model(self, request, obj):
        detail = _describe(obj)
        super().delete_model(request, obj)
        audit.record(request, "delete-schedule", obj.queue, detail=f"{detail}: deleted")

    def delete_queryset(self, request, queryset):
        for obj in list(queryset):
            self.delete_model(request, obj)
