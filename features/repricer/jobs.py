"""Repricer: apply a product's price on the marketplace, at most once per idempotency key.

Keys belong to an owner (the user who asked through the API): the same key from two owners is two
changes, and the marketplace sees the key prefixed with the owner (``owner-7.promo-1``).

The queue runs it with ``attempts=1`` (a price applied twice is harmful, so nothing retries it
blindly; an operator retries a dead letter after looking). The key is what makes even that safe:

1. ``PriceChange`` is created for (owner, key) (unique) or found (``PriceChange.claim``: the API
   creates it when the change is asked, and answers 409 to the same key with other arguments);
   a key asked with other arguments fails for good; a key already ``applied`` -> no-op.
2. The marketplace call carries the key as ``Idempotency-Key``, so a change that reached the
   marketplace before a crash is not applied twice there either.
3. ``pending`` -> ``applied`` is one conditional UPDATE: of two concurrent jobs with one key, only
   one moves the product's price.

No transaction is held open across the HTTP call.

A product's edits within one debounce window run as one job, with the last edit's key and price: once that
change is applied, the window's earlier changes (still ``pending``, the same job) become ``superseded`` in
the same transaction (``PriceChange.supersede_earlier``), and the job's result lists their keys.
"""

from decimal import Decimal

from django.db import transaction
from django.utils import timezone

import queues
from features.marketplace.client import MarketplaceClient

from .models import KeyConflict, PriceChange, Product


@queues.job
def apply_price(product_id, price, idempotency_key, owner_id=None):
    """Job: set ``product_id``'s price to ``price`` (a decimal string) once per owner's ``idempotency_key``.

    ``owner_id`` None: a job from before owners (or enqueued outside the API), keyed as it was then.
    """
    price = Decimal(price)
    job = queues.current_job()  # None when the function is called directly
    try:
        change, _created = PriceChange.claim(owner_id, idempotency_key, product_id, price, job.id if job else "")
    except KeyConflict as exc:
        raise queues.PermanentError(str(exc)) from None
    if change.status == PriceChange.Status.APPLIED:
        return {"applied": False, "reason": "already applied", "product_id": product_id, "price": str(price)}

    with MarketplaceClient() as client:
        client.set_price(product_id, price, idempotency_key=marketplace_key(owner_id, idempotency_key))

    now = timezone.now()
    with transaction.atomic():
        moved = PriceChange.objects.filter(pk=change.pk, status=PriceChange.Status.PENDING).update(
            status=PriceChange.Status.APPLIED, applied_at=now
        )
        if moved:
            Product.objects.update_or_create(product_id=product_id, defaults={"price": price, "price_updated_at": now})
            superseded = change.supersede_earlier(job.id if job else "")
    if not moved:
        return {"applied": False, "reason": "applied concurrently", "product_id": product_id, "price": str(price)}
    result = {"applied": True, "product_id": product_id, "price": str(price)}
    if superseded:  # the window's earlier edits, closed by this one (never sent): the job's result says which
        result["superseded"] = superseded
    return result


def marketplace_key(owner_id, idempotency_key):
    """The ``Idempotency-Key`` sent: one marketplace account serves every owner, so keys must not meet."""
    return idempotency_key if owner_id is None else f"owner-{owner_id}.{idempotency_key}"
