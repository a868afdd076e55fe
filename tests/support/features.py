"""Polling helpers of the end-to-end feature tests (through the status endpoint, as a client would)."""

import pytest

from tests.support import poll, wait_for

FINAL = ("finished", "failed", "canceled", "stopped")


def job_status(api, job_id):
    response = api.get(f"/jobs/{job_id}/")
    assert response.status_code == 200, response.content
    return response.json()


def wait_job(api, job_id, states=FINAL, timeout=60, worker=None):
    """Poll GET /jobs/<id>/ until its state is one of ``states``; returns the last status body."""
    seen = {}

    def reached():
        seen["status"] = job_status(api, job_id)
        return seen["status"]["state"] in states

    if not poll(reached, timeout, interval=0.1):
        log = worker.output()[-3000:] if worker else "-"
        pytest.fail(
            f"timed out after {timeout}s waiting for job {job_id} to reach {states}; "
            f"last status {seen['status']}; worker log:\n{log}"
        )
    return seen["status"]


def dead_letter(job_id, timeout=60):
    from queues.models import DeadLetter

    return wait_for(
        lambda: DeadLetter.objects.filter(job_id=job_id).first(),
        timeout=timeout,
        message=f"a DeadLetter row for job {job_id}",
    )
