"""Polling helpers of the end-to-end feature tests (through the status endpoint, as a client would)."""
from tests.conftest import wait_for

FINAL = ("finished", "failed", "canceled", "stopped")


def job_status(api, job_id):
    response = api.get(f"/jobs/{job_id}/")
    assert response.status_code == 200, response.content
    return response.json()


def wait_job(api, job_id, states=FINAL, timeout=60, worker=None):
    """Poll GET /jobs/<id>/ until its state is one of ``states``; returns the last status body."""
    seen = {}

    def done():
        seen["status"] = job_status(api, job_id)
        return seen["status"]["state"] in states

    wait_for(done, timeout=timeout, interval=0.1,
             message=f"job {job_id} to reach {states} (last: {seen.get('status')}; worker log: "
                     f"{worker.output()[-3000:] if worker else '-'})")
    return seen["status"]


def dead_letter(job_id, timeout=60):
    from queues.models import DeadLetter

    return wait_for(lambda: DeadLetter.objects.filter(job_id=job_id).first(), timeout=timeout,
                    message=f"a DeadLetter row for job {job_id}")
