from rest_framework import serializers

from features.api import EnqueueView, StrictIntegerField, enqueue_schema

from .jobs import sync_cabinet

QUEUE = "orders-sync"


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
        return self.enqueue_job(QUEUE, sync_cabinet, cabinet_id, unique=f"cabinet-{cabinet_id}"), QUEUE
