from django.conf import settings
from django.db import models


class Cabinet(models.Model):
    """A seller cabinet on the marketplace (``cabinet_id`` is the marketplace's id), and who owns it.

    One owner per cabinet: only the owner may sync it through the API. PROTECT: a user who still
    owns cabinets cannot be deleted by accident (hand them to another user, or deactivate the user).
    """

    cabinet_id = models.PositiveIntegerField(unique=True, help_text="the marketplace's cabinet id")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="cabinets")
    name = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["cabinet_id"]

    def __str__(self):
        return f"cabinet {self.cabinet_id}" + (f" ({self.name})" if self.name else "")


class Product(models.Model):
    """A product on the marketplace (``product_id`` is the marketplace's id), and who owns it."""

    product_id = models.PositiveBigIntegerField(unique=True, help_text="the marketplace's product id")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="products")
    name = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["product_id"]

    def __str__(self):
        return f"product {self.product_id}" + (f" ({self.name})" if self.name else "")
