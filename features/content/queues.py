QUEUES = {"content": {"timeout": 600}}
