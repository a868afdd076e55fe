from django.db import models


class Product(models.Model):
    """A product's price as last applied on the marketplace."""

    product_id = models.PositiveBigIntegerField(unique=True)
    price = models.DecimalField(max_digits=12, decimal_places=2)
    price_updated_at = models.DateTimeField()

    def __str__(self):
        return f"product {self.product_id} at {self.price}"


class PriceChange(models.Model):
    """One requested price change, keyed by its idempotency key (unique).

    ``pending`` until the marketplace confirmed it, then ``applied``: a job that finds its key
    already applied does nothing, so the same change can never be applied twice.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        APPLIED = "applied", "applied"

    idempotency_key = models.CharField(max_length=100, unique=True)
    product_id = models.PositiveBigIntegerField(db_index=True)
    price = models.DecimalField(max_digits=12, decimal_places=2)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    job_id = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    applied_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"{self.idempotency_key}: product {self.product_id} -> {self.price} ({self.status})"
