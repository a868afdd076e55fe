"""A job in Redis: its signature (``signing``), the worker's gate that refuses what does not
verify (``gate``), its meta fields (``meta``), reading it back safely (``read``), its results stream
read safely (``results``), what its owner may be told of it wherever it is (``state``:
``queues.job_state``) and how long it is kept (``retention``); the running job as its own code sees it
(``current``: ``queues.current_job()``), and a long job's cursor, checkpoint and pause (``resume``, issue 34).
"""
