from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer
from rest_framework import serializers, status
from rest_framework.response import Response

import queues
from features.api import (
    EnqueueView,
    JobAcceptedSerializer,
    StrictIntegerField,
    enqueue_schema,
    queue_unavailable,
    validation_error,
)
from features.sellers import owners
from features.sellers.models import Cabinet

from .jobs import QUEUE, open_sync_batch, sync_cabinet


class SyncRequest(serializers.Serializer):
    cabinet_id = StrictIntegerField(min_value=1, max_value=2_147_483_647, required=False)


class BatchAcceptedSerializer(serializers.Serializer):
    batch_id = serializers.CharField()
    queue = serializers.CharField()
    status_url = serializers.CharField(help_text="GET it for the batch's state (queues.batch_state)")
    jobs = serializers.ListField(child=serializers.DictField(), help_text="[{cabinet_id, job_id}], one per cabinet")


class OrdersSyncView(EnqueueView):
    """``{"cabinet_id": N}``: enqueue a sync of one of the caller's cabinets (one waiting sync per cabinet
    and owner at most). ``{}``: a batch of one sync per cabinet of the caller's, whose ``on_success``
    rebuilds their orders report (``GET /features/reports/``); answers the batch id."""

    serializer_class = SyncRequest

    @enqueue_schema(
        SyncRequest,
        "Sync one cabinet's orders (cabinet_id), or all of yours in a batch that then rebuilds your report",
        {
            202: OpenApiResponse(
                PolymorphicProxySerializer(
                    component_name="OrdersSyncAccepted",
                    serializers=[JobAcceptedSerializer, BatchAcceptedSerializer],
                    resource_type_field_name=None,
                ),
                description="Enqueued: the job (with cabinet_id), or the batch of all your cabinets (without).",
            )
        },
    )
    def post(self, request):
        data = request.data
        serializer = self.serializer_class(data=data)
        if not serializer.is_valid():
            return validation_error(serializer, data)
        if "cabinet_id" in serializer.validated_data:
            return super().post(request)
        try:
            return self.sync_all()
        except queues.QueueUnavailable as exc:
            return queue_unavailable(exc)

    def enqueue(self, data):
        cabinet_id = self.cabinet(data["cabinet_id"]).cabinet_id  # 404 unless the caller's
        # unique: while a sync of this cabinet still waits, the same owner asking again gets that job.
        return self.enqueue_job(QUEUE, sync_cabinet, cabinet_id, unique=f"cabinet-{cabinet_id}"), QUEUE

    def sync_all(self):
        owner = self.owner
        user = owner.user
        cabinets = list(Cabinet.objects.filter(owner=user).values_list("cabinet_id", flat=True))
        options = {"durable": True}
        if queues.get_queue(QUEUE).config.options.get("limit_concurrency"):
            options["limit_key"] = f"owner:{owner.key}"
        batch, jobs = open_sync_batch(cabinets, owner_id=user.pk, meta=owners.job_meta(owner), **options)
        url = reverse("features:batch-status", args=[batch.id])
        return Response(
            {
                "batch_id": batch.id,
                "queue": QUEUE,
                "status_url": url,
                "jobs": [{"cabinet_id": c, "job_id": j.id} for c, j in zip(cabinets, jobs)],
            },
            status=status.HTTP_202_ACCEPTED,
            headers={"Location": url},
        )
