# Generation is slow and costly: one retry at most. The per-attempt timeout is set at enqueue
# (CONTENT_TIMEOUT, features/conf.py); 600 s is the ceiling when enqueued without one.
# limit_concurrency: at most 2 generations of one owner queued or running at once; the API keys
# each job by its owner (features/api.py, EnqueueView.enqueue_job), so a seller asking for hundreds
# waits behind their own, never in front of the others'.
QUEUES = {"content": {"timeout": 600, "attempts": 2, "limit_concurrency": 2}}
