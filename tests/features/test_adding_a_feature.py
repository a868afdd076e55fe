"""docs/adding-a-feature.md, proven: a newly declared queue shows up in the panel (/admin/queues/)
and in /metrics with no other change, in a real server process, and its jobs run on a real worker."""

import socket
import subprocess
import sys

import httpx
import pytest

import queues
from tests.support import ROOT, wait_for

pytestmark = pytest.mark.slow

SETTINGS = {"DJANGO_SETTINGS_MODULE": "tests.features.newfeature_settings"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_current_project_does_not_know_the_newsletter_queue():
    assert "newsletter" not in queues.queue_names()


@pytest.mark.django_db(transaction=True)
def test_a_newly_declared_queue_appears_in_the_panel_and_metrics_and_runs_jobs(start_worker, subprocess_env):
    env = dict(subprocess_env, **SETTINGS)
    enqueue = "import queues; print(queues.enqueue('newsletter', 'tests.features.newfeature.jobs.send_digest', 7).id)"
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", enqueue],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip().splitlines()[-1]

    port = free_port()
    server = start_worker(f"127.0.0.1:{port}", "--noreload", command="runserver", env=SETTINGS)
    base = f"http://127.0.0.1:{port}"

    def get(path):
        try:
            return httpx.get(base + path, timeout=10)
        except httpx.TransportError:
            return None

    panel = wait_for(lambda: get("/admin/queues/"), timeout=60, message=f"the server ({server.output()[-2000:]})")
    assert panel.status_code == 200
    assert "newsletter" in panel.text
    metrics = get("/metrics")
    assert metrics.status_code == 200
    assert 'optima_queue_jobs{queue="newsletter",state="waiting"} 1.0' in metrics.text

    worker = start_worker("newsletter", "--burst", env=SETTINGS)
    assert worker.wait(60) == 0, worker.output()
    job = queues.get_queue("orders-sync").job_class.fetch(job_id, connection=queues.get_queue("orders-sync").connection)
    assert job.get_status() == "finished"
    assert job.return_value() == {"seller_id": 7, "sent": True}
