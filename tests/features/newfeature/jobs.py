import queues


@queues.job
def send_digest(seller_id):
    return {"seller_id": seller_id, "sent": True}
