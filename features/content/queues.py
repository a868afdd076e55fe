# Generation is slow and costly: one retry at most. The per-attempt timeout is set at enqueue
# (CONTENT_TIMEOUT, features/conf.py); 600 s is the ceiling when enqueued without one.
QUEUES = {"content": {"timeout": 600, "attempts": 2}}
