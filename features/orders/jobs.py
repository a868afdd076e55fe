"""Order sync: fetch a cabinet's orders from the marketplace, upsert them into ``Order``.

Idempotent by construction: rows are keyed by (cabinet_id, external_id) with a unique constraint,
and written with one INSERT ... ON CONFLICT DO UPDATE (``bulk_create(update_conflicts=True)``).
A sync that runs twice, or two that run at once, leave one row per order.
"""

import datetime as dt
from decimal import Decimal, InvalidOperation

from django.db import transaction
from django.utils import timezone

import queues
from features.marketplace.client import MarketplaceClient

from .models import Order

UPDATED_FIELDS = ["status", "total", "currency", "placed_at", "marketplace_updated_at", "synced_at"]


@queues.job
def sync_cabinet(cabinet_id):
    """Job: one cabinet's orders, fetched whole, then upserted in one transaction."""
    with MarketplaceClient() as client:
        payload = client.orders(cabinet_id)
    now = timezone.now()
    rows = [_order_from_api(cabinet_id, item, now) for item in payload]
    with transaction.atomic():
        Order.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["cabinet_id", "external_id"],
            update_fields=UPDATED_FIELDS,
        )
    return {"cabinet_id": cabinet_id, "orders": len(rows)}


def _order_from_api(cabinet_id, item, now):
    """An unsaved Order from one API item; a malformed item is a PermanentError (retries cannot fix it)."""
    try:
        return Order(
            cabinet_id=cabinet_id,
            external_id=str(item["id"]),
            status=str(item["status"])[:32],
            total=Decimal(str(item["total"])),
            currency=str(item.get("currency", ""))[:3],
            placed_at=_when(item["placed_at"]),
            marketplace_updated_at=_when(item.get("updated_at") or item["placed_at"]),
            synced_at=now,
        )
    except (KeyError, TypeError, ValueError, InvalidOperation) as exc:
        raise queues.PermanentError(
            f"cabinet {cabinet_id}: malformed order from the marketplace ({type(exc).__name__}: {exc}): {item!r:.300}"
        ) from None


def _when(value):
    when = dt.datetime.fromisoformat(str(value))
    return when if timezone.is_aware(when) else when.replace(tzinfo=dt.UTC)
