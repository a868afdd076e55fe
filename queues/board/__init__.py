"""The queue panel at /admin/queues/: django-rq's dashboard behind our access control and audit.

- ``access``: who may view and who may act (OPTIMA_ENV, staff permissions, basic auth).
- ``views``: the home page (django-rq's queue table, pause/resume, job search), pause, resume, find.
- ``rq_actions``: django-rq's changing views, audited; chunked "requeue all" / "delete all"; bulk
  actions job by job.
- ``lookups``: unknown queue / scheduler indexes, job ids and worker keys in a URL answer 404.
- ``bounded``: the panel's Redis clients (short timeouts, no retry of a timeout, a deadline per
  request); with ``access.guard``, a Redis that does not answer gives a 503 page within 3 s.
- ``operations``: retry and discard of dead letters, finding a job across queues and registries.
- ``urls``: the URLconf mounted at admin/queues/ (namespace ``django_rq``).

docs/operator.md is the operator's guide.
"""
