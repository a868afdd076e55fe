"""The per-seller orders report, rebuilt when a sync batch of the seller's cabinets succeeded.

``rebuild_report`` is the batch's ``on_success`` callback (features/orders/jobs.py: ``sync_seller``): it runs
once, after every cabinet's sync finished, with the batch id as the keyword ``batch_id``. It is
idempotent (one row per seller, recomputed whole), so a callback run twice by at-least-once delivery (its
own worker killed mid-run) writes the same row.
"""

from decimal import Decimal

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, Sum
from django.utils import timezone

import queues
from features.orders.models import Order
from features.sellers.models import Cabinet

from .models import SellerReport


@queues.job
def rebuild_report(owner_id, batch_id=None):
    """Job: recompute the report of the seller ``owner_id`` (a user's pk) from its cabinets' orders."""
    if not get_user_model().objects.filter(pk=owner_id).exists():
        raise queues.PermanentError(f"rebuild_report: user {owner_id} does not exist (deleted?)")
    cabinet_ids = list(Cabinet.objects.filter(owner_id=owner_id).values_list("cabinet_id", flat=True))
    orders = Order.objects.filter(cabinet_id__in=cabinet_ids)
    totals = orders.aggregate(count=Count("id"), revenue=Sum("total"))
    by_status = dict(orders.values_list("status").annotate(n=Count("id")).order_by("status"))
    with transaction.atomic():
        report, _ = SellerReport.objects.update_or_create(
            owner_id=owner_id,
            defaults={
                "cabinets": len(cabinet_ids),
                "orders": totals["count"] or 0,
                "revenue": totals["revenue"] or Decimal("0"),
                "by_status": by_status,
                "batch_id": batch_id or "",
                "built_at": timezone.now(),
            },
        )
    return {"owner_id": owner_id, "orders": report.orders, "batch_id": batch_id}
