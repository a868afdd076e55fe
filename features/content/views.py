from django.db import transaction
from drf_spectacular.utils import OpenApiResponse, extend_schema_field
from rest_framework import serializers

import queues
from features import conf
from features.api import (
    BatchAcceptedSerializer,
    EnqueueView,
    StrictCharField,
    StrictIntegerField,
    batch_accepted,
    enqueue_schema,
    queue_unavailable,
    validation_error,
)
from features.sellers import owners

from .jobs import generate_content
from .models import ContentBatch, ContentGeneration

QUEUE = "content"


MAX_BATCH_PRODUCTS = 100


class ContentRequest(serializers.Serializer):
    product_id = StrictIntegerField(min_value=1, max_value=2**63 - 1)
    prompt = StrictCharField(min_length=1, max_length=4000, trim_whitespace=False)


@extend_schema_field(
    {
        "type": "array",
        "items": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
        "minItems": 1,
        "maxItems": MAX_BATCH_PRODUCTS,
        "uniqueItems": True,
    }
)
class DistinctIdsField(serializers.ListField):
    """A list of distinct ids: its schema says ``uniqueItems`` (the serializer refuses a repeated one)."""


class ContentBatchRequest(serializers.Serializer):
    product_ids = DistinctIdsField(
        child=StrictIntegerField(min_value=1, max_value=2**63 - 1),
        min_length=1,
        max_length=MAX_BATCH_PRODUCTS,
        help_text=f"1 to {MAX_BATCH_PRODUCTS} distinct products of the caller's, generated as one batch",
    )
    prompt = StrictCharField(min_length=1, max_length=4000, trim_whitespace=False)

    def validate_product_ids(self, value):
        if len(set(value)) != len(value):
            raise serializers.ValidationError("Each product may appear once: remove the repeated ids.")
        return value


class ContentView(EnqueueView):
    """Create a ContentGeneration row for one of the caller's products and enqueue its job, in one transaction."""

    serializer_class = ContentRequest

    @enqueue_schema(ContentRequest, "Generate a product's content (long job with progress)")
    def post(self, request):
        return super().post(request)

    @staticmethod
    def task(owner):
        """``generate_content`` with the queues' options the Tasks API has no words for (see ``enqueue``)."""
        return generate_content.using(
            meta=owners.job_meta(owner),
            limit_key=f"owner:{owner.key}",
            durable=True,
            timeout=conf.get("CONTENT_TIMEOUT"),
        )

    def enqueue(self, data):
        product_id = self.product(data["product_id"]).product_id  # 404 unless the caller's
        with transaction.atomic():
            generation = ContentGeneration.objects.create(
                product_id=product_id, prompt=data["prompt"], owner=self.owner.user
            )
            # Inside the transaction the job goes through the outbox (queues/producer/outbox.py): written to
            # Redis after the commit, so the worker never sees a job whose row is not committed, a
            # rollback enqueues nothing, and a Redis that is down at the commit loses nothing (the
            # job waits in the outbox; the client gets 202 all the same).
            # A Task (features/content/jobs.py): the queues' options the Tasks API has no words for go to
            # using(): the owner in the job's meta (GET /jobs/<id>/ shows it to them only), the owner's limit key
            # (the content queue's limit_concurrency), durable (202 even while Redis is down), the timeout.
            result = self.task(self.owner).enqueue(generation.pk, conf.get("CONTENT_GENERATION_SECONDS"))
            generation.job_id = result.id
            generation.save(update_fields=["job_id"])
        return result, QUEUE


class ContentBatchView(EnqueueView):
    """Content for many of the caller's products at once: a batch whose ``on_complete`` records how many
    generations succeeded and how many died (``ContentBatch``)."""

    serializer_class = ContentBatchRequest

    @enqueue_schema(
        ContentBatchRequest,
        "Generate many products' content as one batch; its on_complete records how many succeeded and failed",
        {202: OpenApiResponse(BatchAcceptedSerializer, description="The batch, accepted.")},
    )
    def post(self, request):
        data = request.data
        serializer = self.serializer_class(data=data)
        if not serializer.is_valid():
            return validation_error(serializer, data)
        try:
            return self.generate_many(serializer.validated_data)
        except queues.QueueUnavailable as exc:
            return queue_unavailable(exc)

    def generate_many(self, data):
        """One ContentGeneration and one job per product, as a batch whose ``on_complete`` records how many
        succeeded and failed in a ``ContentBatch`` row; all in one transaction (the jobs through the outbox)."""
        product_ids = [self.product(p).product_id for p in data["product_ids"]]  # 404 unless all the caller's
        owner = self.owner
        with transaction.atomic():
            record = ContentBatch.objects.create(owner=owner.user, products=len(product_ids))
            on_complete = queues.call(QUEUE, "features.content.jobs.record_batch", record.pk)
            jobs = []
            with queues.batch(
                on_complete=on_complete,
                description=f"content for {len(product_ids)} products",
                meta=owners.job_meta(owner),
            ) as batch:
                for product_id in product_ids:
                    generation = ContentGeneration.objects.create(
                        product_id=product_id, prompt=data["prompt"], owner=owner.user
                    )
                    result = ContentView.task(owner).enqueue(generation.pk, conf.get("CONTENT_GENERATION_SECONDS"))
                    generation.job_id = result.id
                    generation.save(update_fields=["job_id"])
                    jobs.append({"product_id": product_id, "job_id": result.id})
            record.batch_id = batch.id
            record.save(update_fields=["batch_id"])
        return batch_accepted(batch, QUEUE, jobs)
