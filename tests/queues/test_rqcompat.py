"""The rq private members this project relies on are all still there (queues/rqcompat.py)."""
import re
from pathlib import Path

from rq.job import Job
from rq.scheduler import RQScheduler
from rq_scheduler import Scheduler

from queues import rqcompat
from queues.catalog.lookup import get_queue
from queues.worker.adapter import OptimaWorker

ROOT = Path(__file__).resolve().parents[2]


def test_every_private_rq_member_the_project_uses_exists_in_the_installed_rq(queue_redis):
    queue = get_queue("default")
    instances = [
        OptimaWorker([queue], connection=queue_redis),
        RQScheduler([queue], connection=queue_redis),
        Scheduler(queue=queue, connection=queue_redis),
        Job.create("tests.jobs.sample.add", args=(1, 2), connection=queue_redis),
    ]
    missing = rqcompat.missing_members(instances)
    assert missing == [], (
        f"The installed {rqcompat.VERSIONS} no longer has {', '.join(missing)}: queues/rqcompat.py lists what "
        "each one is used for; adapt the function there before upgrading."
    )


def test_a_member_that_rq_dropped_is_reported_by_name(queue_redis, monkeypatch):
    monkeypatch.setattr(rqcompat, "MEMBERS", rqcompat.MEMBERS + [(OptimaWorker, "_no_such_member", "instance"),
                                                                 (Job, "_gone_method", "class")])
    worker = OptimaWorker([get_queue("default")], connection=queue_redis)
    assert rqcompat.missing_members([worker]) == ["queues.worker.adapter.OptimaWorker._no_such_member",
                                                  "rq.job.Job._gone_method"]


def test_no_module_outside_rqcompat_touches_a_private_rq_member():
    names = {name for _, name, _ in rqcompat.MEMBERS}
    pattern = re.compile(r"\.(" + "|".join(sorted(map(re.escape, names))) + r")\b")
    offenders = []
    for path in (ROOT / "queues").rglob("*.py"):
        if path.name == "rqcompat.py" or "migrations" in path.parts:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []
