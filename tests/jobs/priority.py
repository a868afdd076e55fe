"""Jobs of the priority-band tests (tests/queues/test_priority.py): each run appends its label to a file."""
from pathlib import Path

import queues
from queues import RetryAfter


@queues.job
def record(path, label, retries=0):
    """Append ``label`` to ``path``; the first ``retries`` runs then ask for a retry at once (RetryAfter(0))."""
    with open(path, "a") as f:
        f.write(label + "\n")
    if Path(path).read_text().split().count(label) <= retries:
        raise RetryAfter(0, f"{label}: again")
    return label
