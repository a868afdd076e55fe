"""Order sync: fetch a cabinet's orders from the marketplace, upsert them into ``Order``.

``sync_cabinet`` walks the marketplace's pages as a long job that resumes (docs/workflows.md): after each
page is upserted it checkpoints the next page, so a deploy's SIGTERM at page 400 of 500 pauses it (no
attempt spent) and its next run starts at page 400, not 1; after a SIGKILL or a failure it starts again from
the last checkpoint.

Idempotent by construction: rows are keyed by (cabinet_id, external_id) with a unique constraint,
and written with one INSERT ... ON CONFLICT DO UPDATE per page (``bulk_create(update_conflicts=True)``).
A page synced twice (at least once per page: the one in flight when a worker died runs again), or two
syncs at once, leave one row per order.

``sync_seller`` and ``sync_cabinets`` (the periodic sync) open a batch of one sync per cabinet whose
``on_success`` rebuilds the seller's report (features/reports/jobs.py) once every cabinet is synced.
"""

import datetime as dt
from decimal import Decimal, InvalidOperation

from django.db import transaction
from django.utils import timezone

import queues
from features import conf
from features.marketplace.client import MarketplaceClient
from features.sellers.models import Cabinet

from .models import Order

QUEUE = "orders-sync"
REPORT = "features.reports.jobs.rebuild_report"  # by name: the reports feature reads orders, not the reverse
UPDATED_FIELDS = ["status", "total", "currency", "placed_at", "marketplace_updated_at", "synced_at"]


def sync_options(**options):
    """A sync's enqueue options: its jobs start no faster than the marketplace's rate (``limit_rate``, the
    queue's limit: a sync over it waits *held*, no worker taken, no attempt spent), per owner when the caller
    gives the owner's ``limit_key``, else per cabinet (the periodic sync). The client's own limiter
    (features/marketplace/ratelimit.py) still paces the calls inside a job, and those made outside jobs."""
    options.setdefault("limit_rate", conf.get("MARKETPLACE_RATE_LIMIT"))
    return options


@queues.job
def sync_cabinet(cabinet_id):
    """Job: one cabinet's orders, page by page, each page upserted in its own transaction and checkpointed."""
    job = queues.current_job()  # None when the function is called directly (a unit test)
    cursor = job.cursor if job is not None else None
    page, synced = (cursor["page"], cursor["orders"]) if isinstance(cursor, dict) else (1, 0)
    with MarketplaceClient() as client:
        for items, next_page in client.order_pages(cabinet_id, start_page=page):
            now = timezone.now()
            rows = [_order_from_api(cabinet_id, item, now) for item in items]
            with transaction.atomic():
                Order.objects.bulk_create(
                    rows,
                    update_conflicts=True,
                    unique_fields=["cabinet_id", "external_id"],
                    update_fields=UPDATED_FIELDS,
                )
            synced += len(rows)
            if job is not None and next_page is not None:
                job.checkpoint({"page": next_page, "orders": synced})  # may pause here: resumes at next_page
    return {"cabinet_id": cabinet_id, "orders": synced}


def open_sync_batch(cabinet_ids, *, owner_id=None, meta=None, **options):
    """A batch of one ``sync_cabinet`` per cabinet, on ``QUEUE``; when ``owner_id`` is given, its
    ``on_success`` rebuilds that seller's report; ``meta`` (``queues.owner_meta``) owns the batch and its jobs.
    -> (batch, jobs)."""
    on_success = queues.call(QUEUE, REPORT, owner_id) if owner_id is not None else None
    description = f"orders sync of seller {owner_id}" if owner_id is not None else "orders sync"
    # meta: the owner of the batch (GET /batches/<id>/ answers them) and of its members (GET /jobs/<id>/).
    with queues.batch(on_success=on_success, description=description, meta=meta) as batch:
        jobs = [
            queues.enqueue_call(
                QUEUE, sync_cabinet, [c], meta=meta, **sync_options(**{"limit_key": f"cabinet:{c}", **options})
            )
            for c in cabinet_ids
        ]
    return batch, jobs


@queues.job
def sync_seller(owner_id):
    """Job: sync every cabinet of the seller ``owner_id`` in one batch, then rebuild their report."""
    cabinets = list(Cabinet.objects.filter(owner_id=owner_id).values_list("cabinet_id", flat=True))
    batch, _ = open_sync_batch(cabinets, owner_id=owner_id)
    return {"owner_id": owner_id, "batch_id": batch.id, "cabinets": len(cabinets)}


@queues.job
def sync_cabinets(cabinet_ids):
    """Job (the periodic sync): one batch per seller of the given cabinets, each rebuilding that seller's
    report on success; cabinets nobody owns yet sync in a batch of their own, with no report."""
    owned = dict(Cabinet.objects.filter(cabinet_id__in=cabinet_ids).values_list("cabinet_id", "owner_id"))
    by_owner = {}
    for cabinet in cabinet_ids:
        by_owner.setdefault(owned.get(cabinet), []).append(cabinet)
    batches = [open_sync_batch(cabinets, owner_id=owner)[0].id for owner, cabinets in by_owner.items()]
    return {"cabinets": len(cabinet_ids), "batches": batches}


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
