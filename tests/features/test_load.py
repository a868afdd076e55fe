"""Many clients enqueueing at once through the documented production server: no 5xx, no job lost or doubled.

A real gunicorn (``--workers 4``, as docs/operations.md runs it) on this test's database and Redis; 200
POSTs from 50 concurrent clients, alternating ``/features/content/`` (a row and an enqueue in one
transaction, through the outbox) and ``/features/repricer/`` (the idempotency key's row read, then
written, with the enqueue). On SQLite the second answered "database is locked" at once before
IMMEDIATE transactions (a deferred one cannot upgrade its read lock while another process writes:
docs/settings.md#sqlite), with a worker writing to the same file meanwhile. bench/http_load.py measures
the same at scale.
"""

import asyncio
import concurrent.futures
import socket
import subprocess
import sys

import pytest

from features.content.models import ContentGeneration
from queues.models import OutboxEntry
from tests.support import ROOT, poll

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

REQUESTS, CLIENTS = 200, 50


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def gunicorn(subprocess_env, tmp_path):
    port = free_port()
    log = open(tmp_path / "gunicorn.log", "wb")
    env = dict(subprocess_env, CONTENT_GENERATION_SECONDS="0.01")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "optima_site.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "4",
            "--timeout",
            "30",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )

    def listening():
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
        except OSError:
            return proc.poll() is not None  # stop waiting: it died
        return True

    assert poll(listening, 60, interval=0.1) and proc.poll() is None, (tmp_path / "gunicorn.log").read_text()
    yield f"http://127.0.0.1:{port}", tmp_path / "gunicorn.log"
    proc.terminate()
    proc.wait(30)
    log.close()


async def post_all(base, token, product_ids):
    import httpx

    answers = []
    todo = iter(range(REQUESTS))

    async def client_loop():
        async with httpx.AsyncClient(base_url=base, timeout=60, headers={"Authorization": f"Token {token}"}) as client:
            for i in todo:
                product_id = product_ids[i % len(product_ids)]
                if i % 2:
                    path, body = (
                        "/features/repricer/",
                        {"product_id": product_id, "price": "19.90", "idempotency_key": f"load-{i}"},
                    )
                else:
                    path, body = "/features/content/", {"product_id": product_id, "prompt": f"load {i}"}
                response = await client.post(path, json=body)
                answers.append((response.status_code, response.json()))

    await asyncio.gather(*(client_loop() for _ in range(CLIENTS)))
    return answers


def test_200_concurrent_enqueues_through_gunicorn_answer_no_5xx_and_each_job_exists_once(
    api, gunicorn, queue_redis, start_worker, subprocess_env
):
    from queues.catalog.classes import OptimaJob

    base, log = gunicorn
    product_ids = list(range(9001, 9011))
    api.own(products=product_ids)
    # A worker writes to the same database meanwhile (each job updates its row), as in `dev.py run`.
    start_worker("content", "--no-fork", env=dict(subprocess_env, CONTENT_GENERATION_SECONDS="0.01"))
    # In a thread of its own: an earlier test of the session (Playwright's sync API) may have left an
    # event loop set in this one, where asyncio.run() refuses to start another.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        answers = pool.submit(asyncio.run, post_all(base, api.token, product_ids)).result()

    codes = sorted({code for code, _ in answers})
    assert [code for code, _ in answers if code >= 500] == [], (
        f"codes {codes}; gunicorn's log:\n{log.read_text()[-3000:]}"
    )
    assert codes == [202], f"codes {codes}: {[body for code, body in answers if code != 202][:3]}"
    ids = [body["job_id"] for _, body in answers]
    content_ids = [body["job_id"] for _, body in answers if body["queue"] == "content"]
    assert len(set(content_ids)) == len(content_ids) == REQUESTS // 2  # no content job id answered twice
    # the repricer's edits of one product share their window's job (debounce, features/repricer/views.py)
    assert len(set(ids) - set(content_ids)) < REQUESTS // 2
    in_outbox = set(OutboxEntry.objects.filter(job_id__in=ids).values_list("job_id", flat=True))
    in_redis = {job_id for job_id in ids if OptimaJob.exists(job_id, connection=queue_redis)}
    assert (in_outbox & in_redis, set(ids) - in_outbox - in_redis) == (set(), set())
    assert ContentGeneration.objects.count() == REQUESTS // 2  # one row per accepted content request
