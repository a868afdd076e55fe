from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers

import queues
from features import conf
from features.api import (
    ERROR_RESPONSES,
    BatchAcceptedSerializer,
    DetailSerializer,
    EnqueueView,
    StrictIntegerField,
    batch_accepted,
    enqueue_schema,
    queue_unavailable,
)
from features.sellers import owners
from features.sellers.models import Cabinet

from .jobs import QUEUE, open_sync_batch, sync_cabinet, sync_options


class SyncRequest(serializers.Serializer):
    cabinet_id = StrictIntegerField(min_value=1, max_value=2_147_483_647)


class OrdersSyncView(EnqueueView):
    """Enqueue a sync of one of the caller's cabinets (one waiting sync per cabinet and owner at most)."""

    serializer_class = SyncRequest

    @enqueue_schema(SyncRequest, "Sync a cabinet's orders from the marketplace")
    def post(self, request):
        return super().post(request)

    def enqueue(self, data):
        cabinet_id = self.cabinet(data["cabinet_id"]).cabinet_id  # 404 unless the caller's
        # unique: while a sync of this cabinet still waits, the same owner asking again gets that job.
        options = sync_options(limit_key=f"owner:{self.owner.key}")  # the owner's key, as enqueue_job's, with a rate
        return self.enqueue_job(QUEUE, sync_cabinet, cabinet_id, unique=f"cabinet-{cabinet_id}", **options), QUEUE


class OrdersSyncAllView(EnqueueView):
    """Every cabinet of the caller's, synced as one batch whose ``on_success`` rebuilds their orders report
    (``GET /features/reports/``) once every sync finished. No body: answers the batch id."""

    @extend_schema(
        request=None,
        summary="Sync all your cabinets as one batch, then rebuild your orders report",
        responses={
            202: OpenApiResponse(BatchAcceptedSerializer, description="The batch, accepted."),
            401: ERROR_RESPONSES[401],
            403: ERROR_RESPONSES[403],
            503: OpenApiResponse(DetailSerializer, description="The queues are unavailable."),
        },
    )
    def post(self, request):
        owner = self.owner
        user = owner.user
        if owner.anonymous:  # dev's demo: the anonymous owner's cabinets are the periodic sync's (1-4), claimed
            cabinets = [owners.owned_cabinet(owner, c).cabinet_id for c in conf.sync_cabinets()]
        else:
            cabinets = list(Cabinet.objects.filter(owner=user).values_list("cabinet_id", flat=True))
        # as EnqueueView.enqueue_job: one seller never floods; and a rate (jobs.sync_options)
        options = {"durable": True, "limit_key": f"owner:{owner.key}"}
        try:
            batch, jobs = open_sync_batch(cabinets, owner_id=user.pk, meta=owners.job_meta(owner), **options)
        except queues.QueueUnavailable as exc:
            return queue_unavailable(exc)
        members = [{"cabinet_id": c, "job_id": j.id} for c, j in zip(cabinets, jobs, strict=True)]
        return batch_accepted(batch, QUEUE, members)
