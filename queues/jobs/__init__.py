"""A job in Redis: its signature (``signing``), the worker's gate that refuses what does not
verify (``gate``), its meta fields (``meta``), reading it back safely (``read``) and how long it is kept
(``retention``).
"""
