"""Content generation: a long job (simulated LLM text) that reports progress and has a timeout.

Written with Django's Tasks API (``@task``, docs/tasks.md), the worked example of docs/adding-a-feature.md:
the view enqueues it with ``generate_content.using(...).enqueue(...)``; on the queues' Tasks backend it is a
job like any other (retry, dead letter, panel, ``GET /jobs/<id>/``), its id the TaskResult's.

Progress is reported with ``queues.current_job().set_progress(step, STEPS)``, which ``GET /jobs/<id>/``
and the queue panel show. The timeout is the enqueue's ``timeout``
(``CONTENT_TIMEOUT``); RQ stops an attempt that exceeds it with an exception raised inside the job,
which is recorded on the row before the queues take over (retry, then dead letter). The text is
stored in ``ContentGeneration``, created by the view in the same transaction as the enqueue: the
job only starts once that row is committed.
"""

import time

from django.utils import timezone
from django_tasks import task

import queues

from .models import ContentBatch, ContentGeneration

STEPS = 10


@task(queue_name="content")
def generate_content(generation_id, duration):
    """Job: generate the text of one ``ContentGeneration`` in ``duration`` seconds (simulated)."""
    Status = ContentGeneration.Status
    try:
        generation = ContentGeneration.objects.get(pk=generation_id)
    except ContentGeneration.DoesNotExist:
        raise queues.PermanentError(f"ContentGeneration {generation_id} does not exist (deleted?)") from None
    job = queues.current_job()  # None when the function is called directly (a unit test)
    ContentGeneration.objects.filter(pk=generation_id).update(
        status=Status.RUNNING,
        started_at=timezone.now(),
        attempts=generation.attempts + 1,
        error="",
        job_id=job.id if job else generation.job_id,
    )
    try:
        words = generation.prompt.split() or ["product"]
        sentences = []
        for step in range(1, STEPS + 1):
            time.sleep(duration / STEPS)
            sentences.append(
                f"{words[(step - 1) % len(words)].capitalize()} makes product {generation.product_id} "
                f"stand out (part {step})."
            )
            if job is not None:
                job.set_progress(step, STEPS)
        text = " ".join(sentences)
    except Exception as exc:
        ContentGeneration.objects.filter(pk=generation_id).update(
            status=Status.FAILED, error=f"{type(exc).__name__}: {exc}", finished_at=timezone.now()
        )
        raise
    ContentGeneration.objects.filter(pk=generation_id).update(
        status=Status.DONE, text=text, error="", finished_at=timezone.now()
    )
    return {"generation_id": generation_id, "characters": len(text)}


@queues.job
def record_batch(content_batch_id, batch_id=None):
    """Job: the ``on_complete`` of a content batch: every generation finished or died; record how many of each
    (read from ``queues.batch_state``). Idempotent: run twice, it writes the same counts."""
    state = queues.batch_state(batch_id) if batch_id else None
    if state is None:
        raise queues.PermanentError(f"record_batch: batch {batch_id!r} of ContentBatch {content_batch_id} is gone")
    ContentBatch.objects.filter(pk=content_batch_id).update(
        succeeded=state.finished, failed=state.dead, completed_at=timezone.now()
    )
    return {"content_batch_id": content_batch_id, "succeeded": state.finished, "failed": state.dead}
