"""The queue panel at /admin/queues/: django-rq's dashboard behind our access control and audit.

- ``access``: who may view and who may act (OPTIMA_ENV, staff permissions, basic auth); ``throttle``:
  failed sign-ins per client address.
- ``views``: the home page (counts per state, pause/resume, job search), pause, resume, find.
- ``rq_actions``: django-rq's changing views of one job, audited, with a confirmation first; bulk actions job by
  job; ``queue_actions``: "empty queue" and the chunked "requeue all" / "delete all" failed jobs.
- ``lookups``: unknown queue / scheduler indexes, job ids and worker keys in a URL answer 404.
- ``bounded``: the panel's Redis clients (short timeouts, no retry of a timeout, a deadline per
  request); with ``access.guard``, a Redis that does not answer gives a 503 page within 3 s.
- ``readonly``, ``stats``, ``patches``: django-rq's views made JSON-only and read-only; ``patches.REBIND``
  is every name rebound inside django-rq (start-up fails when django-rq lacks one).
- ``periodic``, ``history``, ``corrupt``: the periodic jobs page, the home page's charts, corrupt jobs' pages;
  ``readers``: the worker sets and hashes and rq-scheduler's set, read without a 500 for what they hold.
- ``batches``: the Batches list, a batch's page and its Cancel, and a job's batch and chain on its page
  (issue 34; the list is ``queues/workflows/index.py``'s sorted set).
- ``urls``: the URLconf mounted at admin/queues/ (namespace ``django_rq``), denied by default: each
  django-rq URL classified read or act (an unclassified one is not mounted), any POST needs act.

docs/operator.md is the operator's guide.
"""
