"""Job functions of the operator-surface tests (module-level, importable by real workers)."""
import os

import queues


@queues.job
def fail_until_exists(path):
    """Fails until ``path`` exists: a dead job that a retry after the "fix" completes."""
    if not os.path.exists(path):
        raise RuntimeError(f"upstream not ready: {path} is missing")
    return "fixed"
