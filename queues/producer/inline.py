"""An enqueue inside ``queues.testing.inline()``: the built, signed job runs now, in the caller's thread.

Nothing is written to Redis. rq's ``Job.perform`` runs it (so ``queues.current_job()`` answers inside, as in a
worker) and its exception propagates to the enqueue's caller; the job is marked finished in memory.
"""

from rq.job import Job, JobStatus

from queues import rqcompat


def run(job: Job) -> Job:
    """Run ``job`` (built, never written); -> the job, its return value in rq's cached result."""
    # queues.current_job().set_progress then keeps the meta in memory (queues/jobs/current.py)
    job._queues_inline = True  # type: ignore[attr-defined]
    job.perform()
    rqcompat.set_status_in_hash(job, JobStatus.FINISHED)  # in memory only: nothing is written
    return job


def run_all(jobs: list[Job]) -> list[Job]:
    return [run(job) for job in jobs]
