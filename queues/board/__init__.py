"""The queue panel at /admin/queues/: our own pages, behind our access control and audit.

Each page is one view and one template (``queues/templates/queues/``), reading through the read layer
(``readonly``, ``readers``, ``queues.jobs.read``): bounded reads, a key of the wrong type shown as empty and
reported, nothing unpickled, nothing written on a GET, at most 5 Redis round trips whatever the page size.

- ``access``: who may view and who may act (OPTIMA_ENV, staff permissions, basic auth); ``throttle``:
  failed sign-ins per client address.
- ``views``: the home page (counts per state, pause/resume, job search, history) and ``stats.json``, pause,
  resume, find a job by id; ``stats``: the counts of every queue in one pipeline.
- ``lists``: a queue's page and its jobs by state (tabs, pages, order, bulk selection); ``paging``.
- ``job``: a job's page (arguments, meta, progress, attempts and their errors, batch and chain, actions).
- ``workers``: the workers, one worker, rq-scheduler's scheduled jobs.
- ``rq_actions``: the actions on one job (GET confirms, POST acts, audited) and the bulk actions job by job;
  ``queue_actions``: "empty queue" and the chunked "requeue all" / "delete all" failed jobs.
- ``lookups``: unknown queue / scheduler indexes, job ids and worker keys in a URL answer 404.
- ``bounded``: the panel's Redis clients (short timeouts, no retry of a timeout, a deadline per
  request); with ``access.guard``, a Redis that does not answer gives a 503 page within 3 s.
- ``readonly``: the read-only queue and registries (JSON, no cleanup on read).
- ``periodic``, ``history``, ``corrupt``: the periodic jobs page, the home page's charts, corrupt jobs' pages;
  ``readers``: the worker sets and hashes and rq-scheduler's set, read without a 500 for what they hold.
- ``batches``: the Batches list, a batch's page and its Cancel, and a job's batch and chain on its page
  (the list is ``queues/workflows/index.py``'s sorted set).
- ``urls``: the URLconf mounted at admin/queues/ (namespace ``django_rq``, django-rq 4.2's routes and names
  kept), denied by default: every page classified read or act in one table, any POST needs act.

docs/operator.md is the operator's guide.
"""
