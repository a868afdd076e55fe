"""Every operator action, whichever door it comes through: the panel, the Django admin, the JSON API.

- ``actions.py``: the table of actions (what each acts on, the permission it needs, whether it cannot
  be undone and so needs a confirmation, its audit row's action) and the one entry point, ``perform``:
  the permission check, the confirmation rule, the audit row and the answer for an object that changed
  meanwhile are written once there, and every door calls it.
- ``jobs.py``: what each action does to one job (delete, requeue, enqueue, stop, cancel), a delete or
  requeue of many a chunk at a time (``run_many``), and the walk of every job of a queue in one state (the
  panel's "select all, across pages").
- ``queues_wide.py``: "Empty" a queue, "Delete All" and "Requeue All" of its failed jobs (one Lua call, or
  a walk of the failed registry in chunks), one target per queue.
- ``deadletters.py``: retry, discard and cancel-the-retry of one dead letter (over
  ``queues.failures.operations``).
- ``others.py``: pause and resume of a queue, cancel of a batch.
- ``limit_keys.py``: pause and resume of one limit key (its held jobs wait; the rest of its queue runs).
- ``results.py``: the answers (``Result`` per object: done / refused / changed meanwhile; ``Outcome`` for all).
"""
