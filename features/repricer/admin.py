from django.contrib import admin

from .models import PriceChange


@admin.register(PriceChange)
class PriceChangeAdmin(admin.ModelAdmin):
    """Price changes as the API asked them: ``pending``, ``applied``, or ``superseded`` by the later edit of
    their debounce window that was applied instead (features/repricer/models.py)."""

    list_display = [
        "idempotency_key",
        "owner",
        "product_id",
        "price",
        "status",
        "superseded_by",
        "job_id",
        "created_at",
    ]
    list_filter = ["status"]
    list_select_related = ["owner", "superseded_by"]
    search_fields = ["=idempotency_key", "=product_id", "=job_id", "owner__username"]
    raw_id_fields = ["owner", "superseded_by"]
    readonly_fields = ["created_at", "applied_at"]
