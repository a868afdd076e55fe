from django.db import transaction
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers, status
from rest_framework.exceptions import APIException

from features import conf
from features.api import EnqueueView, MoneyField, StrictIntegerField, StrictRegexField, enqueue_schema

from .jobs import apply_price
from .models import KeyConflict, PriceChange

QUEUE = "repricer"


class RepriceRequest(serializers.Serializer):
    product_id = StrictIntegerField(min_value=1, max_value=2**63 - 1)
    price = MoneyField(help_text="the new price, a string like '19.90'")
    idempotency_key = StrictRegexField(
        r"^[A-Za-z0-9._-]{1,100}$",
        max_length=100,
        error_messages={"invalid": "Use 1-100 letters, digits, '.', '_' or '-'."},
        help_text="the same key applies the price at most once (keys are the caller's own)",
    )


class KeyConflictSerializer(serializers.Serializer):
    detail = serializers.CharField()
    idempotency_key = serializers.CharField(help_text="the key, already used for another product or price")


class IdempotencyKeyConflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "idempotency_key_conflict"


class RepricerView(EnqueueView):
    """Enqueue one price change; attempts=1 (never retried blindly) and idempotent by key; a product's edits
    within ``REPRICER_DEBOUNCE_SECONDS`` are one job (the last price), the same job id answered to each; an
    owner's pushes start no faster than ``REPRICER_RATE`` (the queue's rate limit, per owner)."""

    serializer_class = RepriceRequest

    @enqueue_schema(
        RepriceRequest,
        "Set a product's price (once per idempotency key)",
        {
            409: OpenApiResponse(
                KeyConflictSerializer,
                description="The idempotency key was already used with another "
                "product or price (whether that change is queued, running or done); nothing enqueued.",
            ),
        },
    )
    def post(self, request):
        return super().post(request)

    def enqueue(self, data):
        key = data["idempotency_key"]
        product_id = self.product(data["product_id"]).product_id  # 404 unless the caller's
        owner_id = self.owner.user.pk
        # The key's row is claimed with the enqueue (one transaction: a 503 claims nothing), so the same key
        # with other arguments gets the same 409 while the first job is queued, running, or done.
        with transaction.atomic():
            try:
                change, created = PriceChange.claim(owner_id, key, product_id, data["price"])
            except KeyConflict as exc:
                raise IdempotencyKeyConflict({"detail": str(exc), "idempotency_key": key}) from None
            job = self.enqueue_job(
                QUEUE,
                apply_price,
                product_id,
                str(data["price"]),
                key,
                owner_id,
                attempts=1,  # a price applied twice is harmful: no automatic retry (the ADR's own example)
                # One push per product and window, with the last edit's price: every edit of the window is
                # answered with the same job id. Written at once (not the outbox): the answer is Redis' state.
                debounce_key=f"price-{owner_id}-{product_id}",
                debounce_seconds=conf.get("REPRICER_DEBOUNCE_SECONDS"),
                debounce_max_seconds=max(
                    conf.get("REPRICER_DEBOUNCE_MAX_SECONDS"), conf.get("REPRICER_DEBOUNCE_SECONDS")
                ),
                durable=False,
                # The queue's limit for the marketplace's calls per seller: pushes beyond REPRICER_RATE wait
                # held (no worker taken, no attempt spent) on the owner's key, which also bounds how many run
                # at once (the queue's limit_concurrency). A debounced job goes through it when due.
                limit_key=f"owner:{self.owner.key}",
                limit_rate=conf.get("REPRICER_RATE"),
            )
            if created:
                change.job_id = job.id
                change.save(update_fields=["job_id"])
        return job, QUEUE
