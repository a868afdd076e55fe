"""Backoffs of Tasks for tests/queues/tasks/test_task_retries.py: ``(exception, task_result) -> seconds or None``.

A backoff runs in the worker's process (a work horse forked from the test's): ``SEEN`` names the file where
``recorded`` writes what it was given, one JSON line per call."""

import json

SEEN = ""  # set by the test before its worker forks
BROKEN = "tests.queues.tasks.backoffs.broken"


def recorded(exception, task_result):
    """Half a second after the first failure (the retry waits in the scheduled registry), then at once."""
    with open(SEEN, "a") as f:
        f.write(
            json.dumps(
                {
                    "exception": f"{type(exception).__name__}: {exception}",
                    "status": task_result.status.value,
                    "attempts": task_result.attempts,
                    "errors": [e.exception_class_path for e in task_result.errors],
                    "last_traceback_says": task_result.errors[-1].traceback.strip().splitlines()[-1],
                    "id": task_result.id,
                }
            )
            + "\n"
        )
    return 0.5 if task_result.attempts == 1 else 0


def at_once(exception, task_result):
    return 0


def none_after_two(exception, task_result):
    """No retry once two attempts failed."""
    return None if len(task_result.errors) >= 2 else 0


def broken(exception, task_result):
    raise RuntimeError("this backoff is broken")


def one_argument(exception):
    return 0
