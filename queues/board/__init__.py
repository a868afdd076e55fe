"""The queue panel at /admin/queues/: django-rq's dashboard behind our access control and audit.

- ``access``: who may view and who may act (OPTIMA_ENV, staff permissions, basic auth).
- ``views``: the home page (django-rq's queue table, pause/resume, job search), pause, resume, find.
- ``rq_actions``: django-rq's changing views, audited; chunked "requeue all" / "delete all".
- ``operations``: retry and discard of dead letters, finding a job across queues and registries.
- ``urls``: the URLconf mounted at admin/queues/ (namespace ``django_rq``).

docs/operator.md is the operator's guide.
"""
