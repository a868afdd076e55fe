# limit_concurrency: at most 4 price changes of one owner queued or running at once (the API keys
# each change by its owner, features/api.py).
QUEUES = {"repricer": {"attempts": 1, "limit_concurrency": 4}}
