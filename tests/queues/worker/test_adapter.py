"""The worker adapter reads as a map (queues/worker/adapter.py): every method of its classes says
which process runs it, so nobody has to work out whether an override runs in the horse."""

import ast
import re
from pathlib import Path

from queues.worker import adapter

MARKER = re.compile(r"#\s*(worker|horse|both)\b")
CLASSES = ("WorkerBehaviour", "OptimaWorker", "OptimaSimpleWorker")


def test_every_method_of_the_worker_classes_names_the_process_that_runs_it():
    path = Path(adapter.__file__)
    lines = path.read_text().splitlines()
    unmarked = []
    for cls in ast.parse(path.read_text()).body:
        if not (isinstance(cls, ast.ClassDef) and cls.name in CLASSES):
            continue
        for method in cls.body:
            if isinstance(method, ast.FunctionDef):
                signature = lines[method.lineno - 1 : method.body[0].lineno - 1]
                if not any(MARKER.search(line) for line in signature):
                    unmarked.append(f"{cls.name}.{method.name} (line {method.lineno})")
    assert unmarked == []


def test_the_three_worker_classes_are_where_settings_name_them():
    import queues.worker

    assert (queues.worker.OptimaWorker, queues.worker.OptimaSimpleWorker) == (
        adapter.OptimaWorker,
        adapter.OptimaSimpleWorker,
    )
