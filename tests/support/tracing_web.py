"""A web process for tests/queues/tracing/test_tracing.py: Django set up with ``OTEL_*`` from the environment
(so the app installs the SDK and, opentelemetry-instrumentation-django being installed, instruments
Django), one request through the test client to a view that enqueues; prints the job id.

    python tests/support/tracing_web.py   (cwd: the repository; DJANGO_SETTINGS_MODULE and OTEL_* set)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def enqueue_view(request):
    from django.http import HttpResponse

    import queues

    return HttpResponse(queues.enqueue("default", "tests.jobs.sample.add", 2, 3).id)


urlpatterns = []


def main():
    import django

    django.setup()
    from django.test import Client, override_settings
    from django.urls import path
    from opentelemetry import trace

    urlpatterns.append(path("orders/", enqueue_view))
    with override_settings(ROOT_URLCONF=__name__, ALLOWED_HOSTS=["testserver"]):
        response = Client().get("/orders/")
    assert response.status_code == 200, response
    trace.get_tracer_provider().force_flush()
    print(response.content.decode())


if __name__ == "__main__":
    main()
