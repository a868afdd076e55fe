"""The feature API: POST endpoints that enqueue, job status, the OpenAPI schema and its pages (Swagger UI at
``api/docs/``, Redoc at ``api/redoc/``) (docs/api.md)."""

from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny

from features.api import BatchStatusView, JobListView, JobStatusView, unknown_endpoint
from features.content.views import ContentBatchView, ContentView
from features.orders.views import OrdersSyncAllView, OrdersSyncView
from features.reports.views import ReportView
from features.repricer.views import RepricerView

app_name = "features"

urlpatterns = [
    path("features/orders/sync/", OrdersSyncView.as_view(), name="orders-sync"),
    path("features/orders/sync-all/", OrdersSyncAllView.as_view(), name="orders-sync-all"),
    path("features/repricer/", RepricerView.as_view(), name="repricer"),
    path("features/content/", ContentView.as_view(), name="content"),
    path("features/content/batch/", ContentBatchView.as_view(), name="content-batch"),
    path("features/reports/", ReportView.as_view(), name="reports"),
    path("jobs/", JobListView.as_view(), name="job-list"),
    path("jobs/<str:job_id>/", JobStatusView.as_view(), name="job-status"),
    path("batches/<str:batch_id>/", BatchStatusView.as_view(), name="batch-status"),
    # The schema is documentation, with nothing secret in it: public, like the Swagger page it feeds.
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[AllowAny]), name="schema"),
    # The schema rendered for people (Swagger UI, Redoc), its assets served locally (drf-spectacular-sidecar).
    path(
        "api/docs/",
        SpectacularSwaggerView.as_view(url_name="features:schema", permission_classes=[AllowAny]),
        name="api-docs",
    ),
    path(
        "api/redoc/",
        SpectacularRedocView.as_view(url_name="features:schema", permission_classes=[AllowAny]),
        name="api-redoc",
    ),
    # Last: any other path of the API answers a JSON 404 (docs/api.md: every 4xx is JSON).
    re_path(r"^(?:features|jobs|batches)(?:/.*)?$", unknown_endpoint),
]
