from django.db import transaction
from rest_framework import serializers

from features import conf
from features.api import EnqueueView, StrictCharField, StrictIntegerField, enqueue_schema
from features.sellers import owners

from .jobs import generate_content
from .models import ContentGeneration

QUEUE = "content"


class ContentRequest(serializers.Serializer):
    product_id = StrictIntegerField(min_value=1, max_value=2**63 - 1)
    prompt = StrictCharField(min_length=1, max_length=4000, trim_whitespace=False)


class ContentView(EnqueueView):
    """Create a ContentGeneration row for one of the caller's products and enqueue its job, in one transaction."""

    serializer_class = ContentRequest

    @enqueue_schema(ContentRequest, "Generate a product's content (long job with progress)")
    def post(self, request):
        return super().post(request)

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
            owner = self.owner
            result = generate_content.using(
                meta=owners.job_meta(owner),
                limit_key=f"owner:{owner.key}",
                durable=True,
                timeout=conf.get("CONTENT_TIMEOUT"),
            ).enqueue(generation.pk, conf.get("CONTENT_GENERATION_SECONDS"))
            generation.job_id = result.id
            generation.save(update_fields=["job_id"])
        return result, QUEUE
