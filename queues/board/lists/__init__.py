"""The panel's queue page and its job lists (issue 33): ours, in place of django-rq's, at django-rq's URLs.

``reads.py`` (the states, the counts, a window of a list's ids, their functions, the page's jobs: one
pipeline each), ``queue_page.py``, ``pages.py`` (the lists and their JSON), ``confirm.py`` (bulk actions);
``paging.py`` beside them checks a list's query, ``live.py`` its refresh.

- ``queue_details`` (``queues/queue.html``): counts per state (one pipeline, with the priority bands of the
  queued list, the ends of the queue, its workers and rq's scheduler lock), the oldest and newest queued job
  and the scheduler's PID (one pipeline), the jobs held by a limit key (``limits.keys_in_use``: two).
- ``job_list`` (``queues/jobs.html``), one view for every state (``STATES``): the tabs with their counts and
  the page's ids (two pipelines), the page's jobs (and, for the started list, rq's executions) in one more.
  Sorted sets read newest first unless ``?order=oldest``, the queued list next-to-run first unless
  ``?order=newest``; ``paging`` gives the slice (``?page=``, ``?per_page=``) and checks the order and the
  filter. ``?func=`` (text in the function's path) reads the first ``SCAN_LIMIT`` ids of the list and their
  functions (one round trip more: Redis cannot read a job's compressed ``data``), then pages the matching
  ones. ``?format=json``: the same page as JSON, with its ``data-live`` regions rendered by the page's
  partials (``queues/_jobs_*.html``) for ``live.js`` (``live.py``). A filter it cannot use: 400, saying why.
- ``confirm_bulk`` (``queues/confirm_bulk.html``): the confirmation of a bulk action of a list, posting to
  ``django_rq:actions`` (``rq_actions.bulk_actions``) the selected ids, or, for "Select all N jobs in
  <state>", ``select_across=1`` with the state and the filter (the action walks the state itself).

Every read is bounded (a page of at most ``paging.PER_PAGE_CHOICES[-1]`` jobs, each hash capped by
``jobread``), nothing is unpickled (``jobread``: JSON only, a poison job shown "corrupt: <why>"), nothing is
written, and a key of the wrong type reads as empty (``readonly.wrong_type``: reported once). A page never
asks a job its status (rq's ``get_status()`` is one round trip per job): the status read with the job is
shown. At most 5 Redis round trips per page, whatever its size (``tests/queues/board/test_lists.py``).
"""

from queues.board.lists.confirm import confirm_bulk
from queues.board.lists.pages import (
    canceled_jobs,
    deferred_jobs,
    failed_jobs,
    finished_jobs,
    job_list,
    queued_jobs,
    scheduled_jobs,
    started_jobs,
)
from queues.board.lists.queue_page import queue_details
from queues.board.lists.reads import BY_KEY, MAX_SELECTED, SCAN_LIMIT, STATES, State

__all__ = [
    "BY_KEY",
    "MAX_SELECTED",
    "SCAN_LIMIT",
    "STATES",
    "State",
    "canceled_jobs",
    "confirm_bulk",
    "deferred_jobs",
    "failed_jobs",
    "finished_jobs",
    "job_list",
    "queue_details",
    "queued_jobs",
    "scheduled_jobs",
    "started_jobs",
]
