"""Search of live jobs: by function, owner, queue and state, and by a text in a job's id or arguments.

- ``index.py``: the index written at enqueue, in the enqueue's own MULTI (sorted sets of job ids by
  enqueue time: all jobs, per queue, per function, per owner), and its trim.
- ``find.py``: ``search_jobs`` (public as ``queues.search_jobs``), which the panel's Search page and
  ``GET /jobs/`` use: one index (or rq registry) read newest first, filtered client-side within a
  bounded scan that says how far it got.
- ``sources.py``: which index or rq registry a search reads, and a page of ids from it, each with the
  key it came from and what that key claims of its jobs;
- ``verify.py``: each candidate checked against its job's own owner, function and queue before it is
  shown or its text matched; a planted entry is dropped from the set, with one WARNING per set.
"""
