"""Work in steps (issue 34): batches of jobs with callbacks that run exactly once.

- ``batches.py``: ``queues.batch()``, ``queues.call()``, ``queues.current_batch()``: opening a batch, its
  callbacks' jobs made (signed) at once, members joining, the block's seal;
- ``scripts.py``: the Lua of every count and of the decision to fire a callback;
- ``hook.py``: the worker's hook that counts a member (its success's MULTI; after its burial);
- ``state.py``: ``queues.batch_state(id)``;
- ``cancel.py``: ``queues.cancel_batch(id, request=None, reason="")``;
- ``chains.py``: ``queues.chain()``, ``queues.group()``, ``queues.chain_state(id)``: each step a batch;
- ``steps.py``: the app's own job of a chain (``advance``: its next step), a job module named by ``apps.py``.

Above ``producer`` (a callback is a job it builds and signs; a member joins through
``producer/joining.py``) and ``failures``; below ``worker``, which imports none of it (the hook). See
docs/workflows.md.
"""
