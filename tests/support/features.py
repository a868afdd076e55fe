"""Polling helpers of the end-to-end feature tests (through the status endpoint, as a client would)."""

import time

import pytest

from tests.support import wait_for

FINAL = ("finished", "failed", "canceled", "stopped")


def job_status(api, job_id):
    response = api.get(f"/jobs/{job_id}/")
    assert response.status_code == 200, response.content
    return response.json()


def wait_job(api, job_id, states=FINAL, timeout=60, worker=None):
    """Poll GET /jobs/<id>/ until its state is one of ``states``; returns the last status body."""
    deadline = time.monotonic() + timeout
    while True:
        status = job_status(api, job_id)
        if status["state"] in states:
            return status
        if time.monotonic() > deadline:
            log = worker.output()[-3000:] if worker else "-"
            pytest.fail(
                f"timed out after {timeout}s waiting for job {job_id} to reach {states}; "
                f"last status {status}; worker log:\n{log}"
            )
        time.sleep(0.1)


def dead_letter(job_id, timeout=60):
    from queues.models import DeadLetter

    return wait_for(
        lambda: DeadLetter.objects.filter(job_id=job_id).first(),
        timeout=timeout,
        message=f"a DeadLetter row for job {job_id}",
    )
