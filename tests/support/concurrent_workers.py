"""Worker classes the concurrency tests name with ``rqworker --worker-class`` (importable by real workers)."""

from queues.worker.asyncworker import OptimaAsyncWorker
from queues.worker.concurrent import OptimaConcurrentWorker


class QuickToGiveUpWorker(OptimaConcurrentWorker):
    """Gives up on a job blocked in C code 2 s past its timeout instead of 60 s (the test's patience)."""

    hard_timeout_margin = 2


class QuickToGiveUpAsyncWorker(OptimaAsyncWorker):
    """``rqworker --async``'s worker, giving up on a coroutine that ignores its cancel 2 s past its timeout."""

    hard_timeout_margin = 2
