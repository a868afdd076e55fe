QUEUES = {"newsletter": {"attempts": 3}}
