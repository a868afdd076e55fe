from rest_framework import serializers

from features.api import EnqueueView, MoneyField, StrictIntegerField, StrictRegexField, enqueue_schema

from .jobs import apply_price

QUEUE = "repricer"


class RepriceRequest(serializers.Serializer):
    product_id = StrictIntegerField(min_value=1, max_value=2**63 - 1)
    price = MoneyField(help_text="the new price, a string like '19.90'")
    idempotency_key = StrictRegexField(
        r"^[A-Za-z0-9._-]{1,100}$", max_length=100,
        error_messages={"invalid": "Use 1-100 letters, digits, '.', '_' or '-'."},
        help_text="the same key applies the price at most once (keys are the caller's own)",
    )


class RepricerView(EnqueueView):
    """Enqueue one price change; attempts=1 (never retried blindly) and idempotent by key."""

    serializer_class = RepriceRequest

    @enqueue_schema(RepriceRequest, "Set a product's price (once per idempotency key)")
    def post(self, request):
        return super().post(request)

    def enqueue(self, data):
        key = data["idempotency_key"]
        product_id = self.product(data["product_id"]).product_id  # 404 unless the caller's
        job = self.enqueue_job(
            QUEUE, apply_price, product_id, str(data["price"]), key, self.owner.user.pk,
            attempts=1,  # a price applied twice is harmful: no automatic retry (the ADR's own example)
            unique=f"price-{key}",  # the same owner's key asked again while waiting returns the same job
        )
        return job, QUEUE
