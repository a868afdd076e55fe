"""Enqueue options never take a job's own arguments (queues/catalog/jobs.py ENQUEUE_OPTIONS).

``queues.enqueue(name, func, *args, <options>, **kwargs)`` hands every other keyword to the job, so
a job with a parameter named like an option is refused when it is decorated (or declared
``enqueue_call_only``), and an option reserved for later is refused by ``enqueue`` rather than
handed to the job.
"""

import ast
import inspect

import pytest
from rq.job import JobStatus

import queues
from queues.catalog import jobs as catalog
from queues.catalog.lookup import get_queue
from queues.exceptions import InvalidJob
from queues.producer import api as enqueueing
from queues.worker.adapter import OptimaWorker
from tests.jobs import options as option_jobs
from tests.support import ROOT, child_json

PLANNED = (
    "durable",
    "limit_key",
    "limit_concurrency",
    "priority",
    "max_run_seconds",
    "debounce_key",
    "debounce_seconds",
    "debounce_max_seconds",
    "throttle_key",
    "throttle_seconds",
    "limit_rate",
)


def test_the_options_are_one_constant_that_enqueueing_shares_with_the_decorator():
    assert enqueueing.ENQUEUE_OPTIONS is catalog.ENQUEUE_OPTIONS
    assert catalog.ENQUEUE_OPTIONS == ("attempts", "timeout", "job_id", "delay", "at", "unique", *PLANNED)
    assert not hasattr(enqueueing, "RESERVED")


def test_every_keyword_option_of_enqueue_is_in_the_constant():
    # A new option added to enqueue's signature without reserving it would take a keyword from jobs.
    signature = inspect.signature(queues.enqueue).parameters.values()
    keyword_only = {p.name for p in signature if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert keyword_only == set(catalog.ENQUEUE_OPTIONS)
    call = inspect.signature(queues.enqueue_call).parameters.values()
    assert {p.name for p in call if p.kind is inspect.Parameter.KEYWORD_ONLY} == {*catalog.ENQUEUE_OPTIONS, "meta"}


@pytest.mark.parametrize("option", catalog.ENQUEUE_OPTIONS)
def test_decorating_a_job_with_a_parameter_named_like_an_option_raises_type_error(option):
    func = module_level(f"def clashing(path, {option}=None): pass")
    with pytest.raises(TypeError) as excinfo:
        queues.job(func)
    message = str(excinfo.value)
    assert message.startswith(
        f"@queues.job: tests.queues.clash.clashing has a parameter named {option!r}, like an option of queues.enqueue"
    )
    assert "Rename the parameter" in message
    assert "@queues.job(enqueue_call_only=True)" in message and "queues.enqueue_call(" in message
    assert "tests.queues.clash.clashing" not in catalog._declared


def module_level(source):
    """The function ``source`` defines, as if at module level of tests.queues.clash (not a job module)."""
    namespace = {}
    exec(source, namespace)
    func = next(v for k, v in namespace.items() if k != "__builtins__")
    func.__module__ = "tests.queues.clash"
    return func


def test_the_refusal_names_every_clashing_parameter_keyword_only_ones_included():
    clashing = module_level("def clashing(path, *, delay, unique=False): pass")
    with pytest.raises(TypeError, match=r"has a parameter named 'delay', 'unique', like an option"):
        queues.job()(clashing)


def test_positional_only_and_star_parameters_cannot_clash_and_are_accepted():
    star = module_level("def star(timeout, /, *attempts, **delay): return timeout")
    assert catalog.option_parameters(star) == []
    assert queues.job(star) is star
    assert getattr(star, catalog.MARK) is True and not catalog.enqueue_call_only(star)
    del catalog._declared["tests.queues.clash.star"]


def test_an_enqueue_call_only_job_is_declared_and_marked():
    func = option_jobs.echo_options
    assert getattr(func, catalog.MARK) is True
    assert catalog.enqueue_call_only(func) is True
    assert catalog.enqueue_call_only("tests.jobs.options.echo_options") is True
    assert catalog.enqueue_call_only("tests.jobs.sample.add") is False
    assert catalog.is_declared("tests.jobs.options.echo_options")


@pytest.mark.django_db(transaction=True)  # outside a transaction: written at once
@pytest.mark.parametrize("func", [option_jobs.echo_options, "tests.jobs.options.echo_options"])
def test_enqueue_refuses_an_enqueue_call_only_job_pointing_to_enqueue_call(func, queue_redis):
    with pytest.raises(InvalidJob) as excinfo:
        queues.enqueue("default", func, "v", timeout=30)
    assert str(excinfo.value) == (
        "func 'tests.jobs.options.echo_options' is declared @queues.job(enqueue_call_only=True): its parameters "
        "are named like enqueue options, so queues.enqueue cannot tell them apart. Use "
        "queues.enqueue_call('default', func, args=[...], kwargs={...}, <options>)."
    )
    assert get_queue("default").job_ids == []


@pytest.mark.django_db(transaction=True)
def test_enqueue_call_delivers_the_option_named_arguments_of_such_a_job_to_it(queue_redis):
    job = queues.enqueue_call(
        "default", option_jobs.echo_options, args=["v"], kwargs={"timeout": 7, "at": "noon"}, timeout=30
    )
    assert job.timeout == 30 and job.kwargs == {"timeout": 7, "at": "noon"}
    OptimaWorker([get_queue("default", connection=queue_redis)], connection=queue_redis).work(
        burst=True, with_scheduler=False
    )
    job = queues.fetch_job(job.id)
    assert job.get_status() == JobStatus.FINISHED
    assert job.return_value() == {"value": "v", "timeout": 7, "at": "noon"}


@pytest.mark.django_db(transaction=True)  # outside a transaction: written at once
def test_enqueue_call_still_passes_a_reserved_name_as_a_job_argument(queue_redis):
    job = queues.enqueue_call("default", "tests.jobs.sample.add", args=[1], kwargs={"durable": 2, "limit_key": 3})
    assert job.kwargs == {"durable": 2, "limit_key": 3}
    assert get_queue("default").job_ids == [job.id]


def test_the_decorator_refuses_a_clash_without_django_or_rq():
    code = (
        "import json, sys, queues\n"
        "try:\n"
        "    @queues.job\n"
        "    def f(limit_concurrency): pass\n"
        "    refusal = None\n"
        "except TypeError as exc:\n"
        "    refusal = str(exc)\n"
        "print(json.dumps({'refusal': refusal, 'imported': sorted({'django', 'rq', 'redis'} & set(sys.modules))}))\n"
    )
    report = child_json(code)
    assert report["imported"] == []
    assert (report["refusal"] or "").startswith(
        "@queues.job: __main__.f has a parameter named 'limit_concurrency', like an option of queues.enqueue"
    ), report


JOB_FILES = sorted(
    {
        *ROOT.glob("features/*/jobs.py"),
        *ROOT.glob("features/*/jobs/*.py"),
        *ROOT.glob("tests/jobs/*.py"),
        ROOT / "bench" / "jobs.py",
        ROOT / "tests" / "features" / "newfeature" / "jobs.py",
    }
)


@pytest.mark.parametrize("path", JOB_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_existing_job_has_a_parameter_named_like_an_option(path):
    """Read from the source: a clash would already fail the import, this names the file and function."""
    clashes = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.decorator_list:
            if any("enqueue_call_only" in ast.unparse(d) for d in node.decorator_list):
                continue
            names = [a.arg for a in node.args.args + node.args.kwonlyargs]
            clashes += [(node.name, n) for n in names if n in catalog.ENQUEUE_OPTIONS]
    assert clashes == []
