"""The dead-letter list's filters: by declared queue, by exception class, by failure group.
Each is answered from an index; none counts or scans the table."""

from django.contrib import admin

from queues import conf
from queues.catalog.lookup import queue_names
from queues.models import DeadLetter, FailureGroup


class QueueFilter(admin.SimpleListFilter):
    """Queues as declared (no DISTINCT over the table)."""

    title = "queue"
    parameter_name = "queue"

    def lookups(self, request, model_admin):

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
