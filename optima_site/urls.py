from django.contrib import admin
from django.urls import include, path

from queues.health import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/queues/", include("django_rq.urls")),
    path("admin/", admin.site.urls),
    path("", include("django_prometheus.urls")),
]
