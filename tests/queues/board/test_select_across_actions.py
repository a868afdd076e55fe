"""The panel's "select all N across pages" acts a chunk of ids at a time (``queues.operator.jobs.run_many``):
its Redis round trips grow with the chunks, not with the jobs, and each job still gets its own answer (one
gone or no longer failed meanwhile is reported, not acted on). Real Redis, the panel's real POST."""

import pytest
from rq.registry import FailedJobRegistry

import queues
from queues.catalog.lookup import get_queue
from queues.jobs import read as jobread
from queues.models import AuditEntry, DeadLetter
from queues.operator import jobs
from tests.support.panel import dead_job

pytestmark = pytest.mark.django_db(transaction=True)

DEFAULT = 1  # the panel's index of "default"
BULK = f"/admin/queues/queues/actions/{DEFAULT}/"
MANY = 2500
CHUNKS = -(-MANY // jobs.CHUNK)  # 5
# Per chunk: its ids read (select), WATCH, failed scores, hashes, MULTI/EXEC. Per request: a few more.
BOUND = 5 * CHUNKS + 10


class Calling:
    """``round_trips.get`` counts what one call sends: this one posts, or calls the service."""

    def __init__(self, call):
        self.call = call

    def get(self, path):
        return self.call()


def failed(count):
    ids = [dead_job("default", row=False)[0].id for _ in range(count)]
    return ids


def test_deleting_2500_failed_jobs_across_pages_costs_round_trips_per_chunk_not_per_job(
    client, queue_redis, round_trips
):
    ids = failed(MANY)
    kept, kept_row = dead_job("default")  # a row follows its job
    data = {"action": "delete", "select_across": "1", "state": "failed"}
    response = round_trips.get(Calling(lambda: client.post(BULK, data, follow=True)), BULK)
    assert [str(m) for m in response.context["messages"]] == [f"Deleted {MANY + 1} jobs."]
    assert round_trips.count <= BOUND, f"{round_trips.count} round trips for {MANY + 1} jobs"
    assert FailedJobRegistry("default", connection=queue_redis).count == 0
    assert queue_redis.exists(*(jobread.job_key(i) for i in [*ids[:500], kept.id])) == 0
    assert queue_redis.exists(*(jobread.job_key(i) for i in ids[-500:])) == 0
    kept_row.refresh_from_db()
    assert kept_row.status == "discarded"
    assert AuditEntry.objects.count() == CHUNKS + 1  # one row per chunk of the selection (2,501 ids: 6)
    assert set(AuditEntry.objects.values_list("outcome", flat=True)) == {"ok"}


def test_requeue_of_2500_jobs_reports_the_ones_gone_or_requeued_meanwhile_and_puts_back_the_rest(
    client, queue_redis, round_trips
):
    ids = failed(MANY)
    gone, taken = ids[10], ids[1700]  # one in the first chunk, one in the fourth
    queue_redis.delete(jobread.job_key(gone))  # expired behind the registry's back
    assert str(queues.perform("ops", "requeue", [taken], queue=get_queue("default")).first()) == "done"
    queue = get_queue("default")
    outcome = round_trips.get(Calling(lambda: queues.perform("ops", "requeue", ids, queue=queue)), "")
    assert round_trips.count <= 4 * CHUNKS + 2, f"{round_trips.count} round trips for {MANY} jobs"
    answers = {r.target: str(r) for r in outcome.results}
    assert [r.target for r in outcome.results] == ids  # in the order given
    assert {i: a for i, a in answers.items() if a != "done"} == {
        gone: "changed meanwhile: gone",
        taken: "changed meanwhile: queued",
    }
    assert FailedJobRegistry("default", connection=queue_redis).get_job_ids() == [gone]  # its id, left as found
    waiting = get_queue("default").get_job_ids()
    assert (len(waiting), sorted(waiting) == sorted(set(ids) - {gone})) == (MANY - 1, True)


def test_a_chunk_requeue_marks_the_dead_letters_retried_and_leaves_a_corrupt_job_to_its_own_answer(client, queue_redis):
    made = [dead_job("default") for _ in range(3)]
    corrupt = made[1][0].id
    queue_redis.hset(jobread.job_key(corrupt), "data", b"\xff not a job")
    outcome = queues.perform("ops", "requeue", [job.id for job, _ in made], queue=get_queue("default"))
    assert [r.kind for r in outcome.results] == ["done", "refused", "done"]
    assert outcome.results[1].detail.startswith("corrupt, not requeued")
    assert sorted(get_queue("default").get_job_ids()) == sorted([made[0][0].id, made[2][0].id])
    assert list(DeadLetter.objects.order_by("id").values_list("status", flat=True)) == ["retried", "open", "retried"]


# --- the confirmation's count of a function filter --------------------------------------------------

CONFIRM = f"/admin/queues/queues/confirm-action/{DEFAULT}/"
TOUCH = "tests.jobs.sample.touch"


def _oldest_touch_jobs(count):
    """``count`` failed jobs of ``sample.touch`` read last (newest first: their ids sort before any uuid, the
    registry's scores being equal), after 2,150 of ``sample.add``."""
    failed(2150)
    for n in range(count):
        dead_job("default", TOUCH, ("/tmp/x",), row=False, job_id=f"0000-touch-{n:04d}")


def test_a_filtered_select_across_counts_exactly_beyond_the_first_2000_jobs(client, queue_redis):
    _oldest_touch_jobs(150)
    data = {"action": "delete", "select_across": "1", "state": "failed", "func": "sample.touch"}
    html = client.post(CONFIRM, data).content.decode()
    assert "all 150 jobs in failed whose function contains “sample.touch”" in html
    assert "at least" not in html
    assert 'id="confirm-across-partial"' not in html


def test_a_filtered_select_across_past_the_count_limit_says_its_count_is_a_lower_bound(
    client, queue_redis, monkeypatch
):
    from queues.board.lists import confirm

    monkeypatch.setattr(confirm, "COUNT_LIMIT", 2000)
    _oldest_touch_jobs(150)
    data = {"action": "delete", "select_across": "1", "state": "failed", "func": "sample.touch"}
    html = client.post(CONFIRM, data).content.decode()
    assert "<b>Delete</b> at least 0 jobs in failed whose function contains “sample.touch”" in html
    assert "Counted among the first 2000 of the 2300 failed jobs: every matching job is acted on" in html
