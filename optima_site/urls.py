from django.contrib import admin
from django.http import HttpResponse
from django.urls import include, path
from django.views.generic import RedirectView

from queues.health import healthz
from queues.metrics.views import metrics as metrics_view

admin.site.site_url = "/admin/queues/"  # the admin's "View site": the queue panel (this site has no other front page)


def favicon(request):
    """No icon, said once a day: a browser asks for /favicon.ico with every page, and each 404 was an
    error line in the log."""
    response = HttpResponse(status=204)
    response["Cache-Control"] = "public, max-age=86400"
    return response


urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("favicon.ico", favicon, name="favicon"),
    # Queue panel: django-rq's dashboard behind the panel's access control and audit (queues/board/).
    path("admin/queues/", include("queues.board.urls")),
    path("admin/", admin.site.urls),
    # django-prometheus' registry, served with the 0.0.4 text content type (or OpenMetrics on request).
    path("metrics", metrics_view, name="prometheus-django-metrics"),
    # Feature API: /features/..., /jobs/<job_id>/, /api/schema/ (features/urls.py, docs/api.md).
    path("", include("features.urls")),
    # The site's root (the admin's "View site" link): the queue panel, the page an operator comes for.
    path("", RedirectView.as_view(url="/admin/queues/", permanent=False), name="site-root"),
]
