QUEUES = {"orders-sync": {}}
