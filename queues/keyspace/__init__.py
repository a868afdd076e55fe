"""The Redis keyspace of the app: every key it writes or reads (``keys``: the table of key families,
their writers and readers, and the never-rename rule), reporting an entry that cannot be read once
and the size caps (``entries``), and setting a key of the wrong type aside around rq's own reads
(``quarantine``).
"""
