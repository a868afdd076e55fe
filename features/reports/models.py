from django.conf import settings
from django.db import models


class SellerReport(models.Model):
    """A seller's orders report: rebuilt by the orders sync batch's ``on_success`` (features/reports/jobs.py)
    once every cabinet of the seller is synced, so it never mixes a fresh cabinet with a stale one."""

    owner = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="orders_report")
    cabinets = models.PositiveIntegerField(default=0, help_text="the seller's cabinets")
    orders = models.PositiveIntegerField(default=0, help_text="orders of those cabinets")
    revenue = models.DecimalField(max_digits=16, decimal_places=2, default=0, help_text="the sum of their totals")
    by_status = models.JSONField(default=dict, help_text="orders by marketplace status")
    batch_id = models.CharField(max_length=64, blank=True, help_text="the sync batch that last rebuilt it")
    built_at = models.DateTimeField()

    class Meta:
        ordering = ["owner_id"]

    def __str__(self):
        return f"orders report of user {self.owner_id} ({self.orders} orders)"
