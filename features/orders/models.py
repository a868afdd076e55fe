from django.db import models


class Order(models.Model):
    """An order of a seller cabinet as the marketplace last reported it.

    (cabinet_id, external_id) is unique: a sync upserts on it, so running the same sync twice or
    concurrently (at-least-once delivery does both) never duplicates a row.
    """

    cabinet_id = models.PositiveIntegerField()
    external_id = models.CharField(max_length=64, help_text="the marketplace's order id")
    status = models.CharField(max_length=32)
    total = models.DecimalField(max_digits=12, decimal_places=2)
    currency = models.CharField(max_length=3)
    placed_at = models.DateTimeField()
    marketplace_updated_at = models.DateTimeField()
    synced_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cabinet_id", "external_id"], name="orders_order_unique_per_cabinet")
        ]
        ordering = ["cabinet_id", "external_id"]

    def __str__(self):
        return f"cabinet {self.cabinet_id} order {self.external_id} ({self.status})"
