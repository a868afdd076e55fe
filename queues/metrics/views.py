"""``GET /metrics``: django-prometheus' export with content negotiation.

django-prometheus 2.5's ``ExportToDjangoView`` always answers with prometheus_client's
``CONTENT_TYPE_LATEST``, which prometheus_client 0.26 made ``text/plain; version=1.0.0``. A plain
scraper (no or a plain ``Accept``) must get ``text/plain; version=0.0.4; charset=utf-8``, so this
view asks prometheus_client's own ``choose_encoder`` instead: the 0.0.4 text by default, OpenMetrics
when the scraper asks for it (Prometheus does). Same registry, same multiprocess handling.
"""

import os

import prometheus_client
from django.http import HttpResponse
from django.views.decorators.http import require_safe
from prometheus_client import multiprocess
from prometheus_client.exposition import choose_encoder

from queues.metrics import collector


@require_safe
def metrics(request):
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ or "prometheus_multiproc_dir" in os.environ:
        registry = prometheus_client.CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        registry.register(collector.QueueCollector())
    else:
        registry = prometheus_client.REGISTRY
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encoder(registry), content_type=content_type)
