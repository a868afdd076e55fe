"""Runs inside the fresh project of tests/test_install.py, never in the suite's process (nor on its sys.path).

Copied next to the new project and run with its settings (``DJANGO_SETTINGS_MODULE=shop.settings``), a
PYTHONPATH of the installed wheel and the project only. One Django start-up for every step after ``migrate``:

1. runs docs/install.md's enqueue block as written (its ``job`` is the good job), and its lines after the enqueue
   for a job that is gone (``gone_state``), enqueues the failing job, runs
   the doc's Tasks API block (its ``result`` is a ``TaskResult``; ``refresh()`` after the worker has run it);
2. starts the documented worker command (argv: JSON list, ``python`` first) in the project's directory, waits
   for the good job to finish and the failing one to be a dead letter, stops the worker with SIGTERM;
3. fetches every panel page, every queues admin changelist, the dead letter's page, /metrics and /healthz as a
   superuser with Django's test Client (through the project's URLconf and middleware, no server to start);

and prints one JSON report; the test asserts on it.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import django

WAIT_SECONDS = 40  # longest wait for the worker to settle both jobs; the test fails (not hangs) past it


def main(enqueue_block, worker_argv, worker_log, username, project, enqueue_task_block):
    django.setup()
    import rq.defaults
    from django.apps import apps
    from django.conf import settings
    from django.contrib import admin
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    import queues
    from queues.models import DeadLetter

    report = {"queues_file": queues.__file__, "rq_key_prefix": rq.defaults.RQ_KEY_PREFIX}
    namespace = {}
    block = Path(enqueue_block).read_text()
    exec(block, namespace)  # docs/install.md's block, as written
    # The block's lines after its enqueue, for a job that is gone (its result expired): they must not raise.
    lines = block.splitlines()
    after = next(i for i, line in enumerate(lines) if "queues.enqueue(" in line) + 1
    gone = {"queues": queues, "job": SimpleNamespace(id="install-test-job-that-is-gone")}
    exec("\n".join(lines[after:]), gone)
    report["gone_state"] = gone["state"]
    good = namespace["job"].id
    bad = queues.enqueue("shipping", "shipping.jobs.always_fails", 7, attempts=1).id
    report.update(good=good, bad=bad)
    task_namespace = {}
    task_block = Path(enqueue_task_block).read_text()
    before_refresh, refresh_line = task_block.rsplit("\n", 2)[0], task_block.rsplit("\n", 2)[1]
    exec(before_refresh, task_namespace)  # the doc's Tasks block up to its refresh(), as written
    task_result = task_namespace["result"]
    report["task_enqueued_status"] = task_result.status.name

    # The worker exports nothing inherited from here: it arranges rq's prefix itself, as manage.py rqworker.
    env = {k: v for k, v in os.environ.items() if k != "RQ_KEY_PREFIX"}
    argv = [sys.executable if word == "python" else word for word in worker_argv]
    with open(worker_log, "wb") as log:
        worker = subprocess.Popen(argv, cwd=project, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + WAIT_SECONDS
            while time.monotonic() < deadline and worker.poll() is None:
                state = queues.job_state(good)
                task_state = queues.job_state(task_result.id)
                if (
                    state is not None
                    and state.state == "finished"
                    and DeadLetter.objects.filter(job_id=bad).exists()
                    and task_state is not None
                    and task_state.state == "finished"
                ):
                    break
                time.sleep(0.2)  # the poll interval of a condition wait (a fresh project: no tests.support)
        finally:
            worker.send_signal(signal.SIGTERM)
            try:
                report["worker_exit"] = worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()
                report["worker_exit"] = "killed after 20 s"
    good_state = queues.job_state(good)
    report["good_state"] = good_state and good_state.state
    report["good_result"] = good_state and good_state.result
    exec(refresh_line, task_namespace)  # the block's last line: result.refresh()
    report["task_status"] = task_result.status.name
    report["task_return_value"] = task_result.return_value if task_result.status.name == "SUCCESSFUL" else None
    report["dead_letters"] = list(DeadLetter.objects.values_list("job_id", flat=True))

    user = get_user_model().objects.get(username=username)
    client = Client(SERVER_NAME="localhost")  # DEBUG's ALLOWED_HOSTS of a fresh project: localhost
    client.force_login(user)
    shipping = list(settings.RQ_QUEUES).index("shipping")
    pages = [
        reverse("django_rq:home"),
        reverse("django_rq:queues_find"),
        reverse("django_rq:queues_periodic"),
        reverse("django_rq:workers", args=[shipping]),
        *[
            reverse(f"django_rq:{name}", args=[shipping])
            for name in (
                "jobs",
                "queue_details",
                "finished_jobs",
                "failed_jobs",
                "scheduled_jobs",
                "started_jobs",
                "deferred_jobs",
            )
        ],
        reverse("django_rq:job_detail", args=[shipping, good]),
        reverse("django_rq:job_detail", args=[shipping, bad]),
    ]
    pages += [
        reverse(f"admin:queues_{model._meta.model_name}_changelist")
        for model in apps.get_app_config("queues").get_models()
        if admin.site.is_registered(model)
    ]
    dead = DeadLetter.objects.filter(job_id=bad).first()
    if dead is not None:
        pages.append(reverse("admin:queues_deadletter_change", args=[dead.pk]))
    report["pages"] = {url: client.get(url).status_code for url in pages}
    report["deadletter_changelist_names_bad_job"] = (
        bad in client.get(reverse("admin:queues_deadletter_changelist")).content.decode()
    )
    metrics = client.get("/metrics")
    report["metrics_status"] = metrics.status_code
    report["metrics_lines"] = [line for line in metrics.content.decode().splitlines() if 'queue="shipping"' in line]
    report["healthz_status"] = client.get("/healthz").status_code
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]), *sys.argv[3:7])
