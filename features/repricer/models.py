from decimal import Decimal

from django.conf import settings
from django.db import models


class KeyConflict(Exception):
    """An idempotency key asked again with other arguments than it was first asked with."""


class Product(models.Model):
    """A product's price as last applied on the marketplace."""

    product_id = models.PositiveBigIntegerField(unique=True)
    price = models.DecimalField(max_digits=12, decimal_places=2)
    price_updated_at = models.DateTimeField()

    def __str__(self):
        return f"product {self.product_id} at {self.price}"


class PriceChange(models.Model):
    """One requested price change, keyed by its owner and idempotency key (unique together).

    ``pending`` until the marketplace confirmed it, then ``applied``: a job that finds its key
    already applied does nothing, so the same change can never be applied twice. Keys are the
    owner's own: another owner's identical key is another change. ``owner`` is empty on rows
    from before owners (and jobs enqueued outside the API); among those the key alone is unique.

    ``superseded``: a product's edits within one debounce window are one job (features/repricer/views.py),
    which runs with the last edit's key and price; when that change is applied, the window's earlier
    changes (the same job, owner and product, still pending) are closed as superseded by it
    (``superseded_by``), never sent. A change whose job failed stays pending (an operator retry re-sends).
    """

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        APPLIED = "applied", "applied"
        SUPERSEDED = "superseded", "superseded"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="price_changes"
    )
    idempotency_key = models.CharField(max_length=100)
    product_id = models.PositiveBigIntegerField(db_index=True)
    price = models.DecimalField(max_digits=12, decimal_places=2)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    job_id = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    superseded_by = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="superseded"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "idempotency_key"], name="repricer_pricechange_key_per_owner"),
            # NULLs are distinct in a unique index: rows without an owner keep the old global uniqueness.
            models.UniqueConstraint(
                fields=["idempotency_key"],
                condition=models.Q(owner__isnull=True),
                name="repricer_pricechange_key_without_owner",
            ),
        ]

    def __str__(self):
        return f"{self.idempotency_key}: product {self.product_id} -> {self.price} ({self.status})"

    @classmethod
    def claim(cls, owner_id, idempotency_key, product_id, price, job_id=""):
        """``(change, created)``: the row of ``owner_id``'s ``idempotency_key``, created for
        ``product_id`` at ``price`` when the key is new. The one rule of a key, for the API (409,
        whether the first change is queued, running or done) and for the job (a permanent failure):
        a key asked again with another product or price raises ``KeyConflict``."""
        price = Decimal(price)
        change, created = cls.objects.get_or_create(
            owner_id=owner_id,
            idempotency_key=idempotency_key,
            defaults={"product_id": product_id, "price": price, "job_id": job_id},
        )
        if change.product_id != product_id or change.price != price:
            raise KeyConflict(
                f"idempotency_key {idempotency_key!r} was already used for product {change.product_id} at "
                f"{change.price}; this asks product {product_id} at {price}: the arguments differ. Use a new key "
                "for a new change."
            )
        return change, created

    def supersede_earlier(self, job_id):
        """Close the other pending changes of job ``job_id`` (the one that applied this change: its debounce
        window's edits, the same owner and product) as superseded by this one -> their idempotency keys,
        oldest first."""
        if not job_id:
            return []
        earlier = PriceChange.objects.filter(
            job_id=job_id, owner_id=self.owner_id, product_id=self.product_id, status=self.Status.PENDING
        ).exclude(pk=self.pk)
        keys = list(earlier.order_by("created_at", "pk").values_list("idempotency_key", flat=True))
        earlier.filter(idempotency_key__in=keys).update(status=self.Status.SUPERSEDED, superseded_by=self)
        return keys
