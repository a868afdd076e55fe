from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from features.api import ERROR_RESPONSES, DetailSerializer, FeatureView
from features.sellers import owners

from .models import SellerReport


class SellerReportSerializer(serializers.ModelSerializer):
    class Meta:
        model = SellerReport
        fields = ["cabinets", "orders", "revenue", "by_status", "batch_id", "built_at"]


class ReportView(FeatureView):
    """The caller's orders report, as the last successful sync of all their cabinets left it."""

    @extend_schema(
        summary="Your orders report (rebuilt when a sync of all your cabinets succeeds)",
        responses={
            200: SellerReportSerializer,
            401: ERROR_RESPONSES[401],
            403: ERROR_RESPONSES[403],
            404: OpenApiResponse(DetailSerializer, description="No report yet: POST /features/orders/sync-all/ first."),
        },
    )
    def get(self, request):
        owner = owners.owner_of(request)
        report = SellerReport.objects.filter(owner=owner.user).first()
        if report is None:
            raise NotFound(
                "No report yet: it is built when a sync of all your cabinets succeeds "
                "(POST /features/orders/sync-all/)."
            )
        return Response(SellerReportSerializer(report).data)
