"""Quiet, useful logs (queues/logs/): one line per job outcome from a real worker, rq's own per-job
lines gone, JSON lines for log shippers, and what the idle processes no longer repeat."""

import json
import logging

import pytest
from django.core.checks import Error, run_checks

import queues
from queues.logs import formats
from tests.jobs import sample

OUTCOME = "queues.jobs: job {id} {outcome}: queue=default func=tests.jobs.sample.{func} attempt={attempt} duration="


def lines_with(output, text):
    return [line for line in output.splitlines() if text in line]


@pytest.mark.django_db(transaction=True)  # the dead letter's row
def test_a_worker_logs_one_line_per_outcome_a_retry_without_traceback_a_dead_letter_with_it(start_worker):
    ok = queues.enqueue("default", sample.add, 2, 3)
    flaky = queues.enqueue("default", sample.fail, "flaky once")
    dead = queues.enqueue("default", sample.fail, "gone for good", attempts=1)
    worker = start_worker("default", "--burst", "--without-scheduler")
    assert worker.wait(60) == 0, worker.output()
    out = worker.output()

    success = lines_with(out, ok.id)
    assert len(success) == 1, out
    assert " INFO " + OUTCOME.format(id=ok.id, outcome="succeeded", func="add", attempt=1) in success[0]
    assert "Successfully completed" not in out and "Job OK" not in out and "result is kept" not in out

    retried = lines_with(out, flaky.id)
    assert len(retried) == 1, out
    assert " WARNING " + OUTCOME.format(id=flaky.id, outcome="retried", func="fail", attempt=1) in retried[0]
    assert retried[0].endswith("; RuntimeError: flaky once; attempt 2 in 1s (backoff)")

    died = lines_with(out, dead.id)
    assert len(died) == 1, out
    assert " ERROR " + OUTCOME.format(id=dead.id, outcome="dead", func="fail", attempt=1) in died[0]
    assert died[0].endswith("; exhausted: RuntimeError: gone for good")
    after = out.split(died[0], 1)[1].splitlines()
    assert after[1] == "Traceback (most recent call last):"
    assert "RuntimeError: gone for good" in after
    assert out.count("Traceback (most recent call last):") == 1  # the dead letter's; none for the retry


@pytest.mark.django_db(transaction=True)
def test_json_log_format_writes_each_line_as_an_object_with_the_outcome_fields(start_worker):
    ok = queues.enqueue("default", sample.add, 1, 1)
    dead = queues.enqueue("default", sample.fail, "no", attempts=1)
    worker = start_worker("default", "--burst", "--without-scheduler", env={"OPTIMA_LOG_FORMAT": "json"})
    assert worker.wait(60) == 0, worker.output()
    entries = [json.loads(line) for line in worker.output().splitlines() if line.strip()]

    by_job = {e.get("job_id"): e for e in entries if e["logger"] == "queues.jobs"}
    assert set(by_job) == {ok.id, dead.id}
    success = by_job[ok.id]
    assert (success["level"], success["outcome"], success["queue"], success["func"], success["attempt"]) == (
        "INFO",
        "succeeded",
        "default",
        "tests.jobs.sample.add",
        1,
    )
    assert isinstance(success["duration"], float) and success["time"].endswith("+00:00")
    assert by_job[dead.id]["level"] == "ERROR"
    assert "Traceback (most recent call last):" in by_job[dead.id]["message"]


def test_a_log_format_other_than_plain_or_json_is_e120(settings):
    settings.QUEUES_LOG_FORMAT = "xml"
    errors = [e for e in run_checks() if e.id == "queues.E120"]
    assert errors == [
        Error(
            "QUEUES_LOG_FORMAT must be 'plain' or 'json', got 'xml'; the logs are written as 'plain' meanwhile.",
            hint="Set OPTIMA_LOG_FORMAT=json (one JSON object a line, for log shippers) or plain (the default), or "
            "QUEUES_LOG_FORMAT in the settings.",
            id="queues.E120",
        )
    ]
    settings.QUEUES_LOG_FORMAT = "json"
    assert [e for e in run_checks() if e.id == "queues.E120"] == []
    assert formats.chosen("xml") == "plain"


def test_a_paused_schedule_is_said_once_not_at_every_tick(queue_redis, caplog):
    import datetime as dt

    from queues.periodic.declare import Schedule
    from queues.periodic.schedules import scheduler_class

    scheduler = scheduler_class()(queue_name="default", interval=5, connection=queue_redis)
    schedule = Schedule(id="tick", queue="default", func="tests.jobs.sample.add", args=(1, 2), interval=60)
    now = dt.datetime.now(dt.UTC)
    with caplog.at_level(logging.DEBUG, logger="rq_scheduler"):
        for _ in range(3):
            scheduler.enqueue_periodic(schedule, now, now, paused=True)
        scheduler.enqueue_periodic(schedule, now, now, paused=False)
    said = [(r.levelname, r.getMessage().split(":")[0]) for r in caplog.records if "Periodic tick" in r.getMessage()]
    assert said == [
        ("INFO", "Periodic tick is paused"),
        ("DEBUG", "Periodic tick is paused"),
        ("DEBUG", "Periodic tick is paused"),
        ("INFO", "Periodic tick is resumed"),
        ("DEBUG", "Periodic tick"),
    ]


def test_the_periodic_scheduler_registers_its_death_once(queue_redis, caplog):
    from queues.periodic.schedules import scheduler_class

    scheduler = scheduler_class()(queue_name="default", interval=5, connection=queue_redis)
    scheduler.register_birth()
    with caplog.at_level(logging.INFO, logger="rq_scheduler"):
        scheduler.register_death()  # its SIGTERM handler
        scheduler.register_death()  # run()'s finally
    assert [r.getMessage() for r in caplog.records if "death" in r.getMessage()] == ["Registering death"]
    assert queue_redis.hexists(scheduler.key, "death")


def test_the_favicon_is_no_content_not_a_404(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 204
    assert response["Cache-Control"] == "public, max-age=86400"


def test_runserver_request_lines_go_to_the_console_handler_in_its_format():
    consoles = [h for h in logging.getLogger().handlers if type(h) is logging.StreamHandler]  # settings' console
    assert len(consoles) == 1
    server = [h for h in logging.getLogger("django.server").handlers if type(h) is logging.StreamHandler]
    assert server == consoles  # not Django's own "django.server" handler: one format, plain or JSON, for both


LINE_SEPARATORS = ["\u2028", "\u2029", "\u0085", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\n", "\r"]


@pytest.mark.parametrize("separator", LINE_SEPARATORS, ids=[f"U+{ord(c):04X}" for c in LINE_SEPARATORS])
def test_a_json_line_holds_no_character_a_unicode_line_splitter_cuts_at(separator):
    """Issue 32, finding 14: U+2028 and U+0085 in ``func`` were written raw, and ``str.splitlines`` (or a shipper
    splitting on Unicode line breaks) cut one record in two. Escaped as ``\\uXXXX``, the value reads back whole."""
    import io

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formats.JsonFormatter())
    logger = logging.getLogger("tests.json-lines")
    logger.addHandler(handler)
    try:
        func = f"tests.jobs.sample.add{separator}forged"
        try:
            raise RuntimeError(f"boom{separator}forged")
        except RuntimeError:
            logger.error("job x failed: func=%s", func, exc_info=True, extra={"func": func, "queue": separator})
    finally:
        logger.removeHandler(handler)
    written = stream.getvalue()
    assert len(written.splitlines()) == 1 and written.endswith("}\n")
    assert separator not in written[:-1]  # the handler's own line end aside
    entry = json.loads(written)
    assert (entry["func"], entry["queue"]) == (func, separator)
    assert f"boom{separator}forged" in entry["exc_info"] and entry["message"].endswith(func)
    assert "café ✓" in json.loads(formats.JsonFormatter().format(logging.makeLogRecord({"msg": "café ✓"})))["message"]
