QUEUES = {"repricer": {"attempts": 1}}
