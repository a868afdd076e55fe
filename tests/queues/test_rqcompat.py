"""The rq private members this project relies on are all still there (queues/rqcompat.py), and no
module but rqcompat uses one: the scan below reads the installed rq, rq-scheduler and django-rq to
learn their private names, so a new use is found without anyone listing it first."""

import ast
import importlib.util
import re
from functools import cache
from pathlib import Path

import pytest
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
        queue,
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
    monkeypatch.setattr(
        rqcompat,
        "MEMBERS",
        rqcompat.MEMBERS + [(OptimaWorker, "_no_such_member", "instance"), (Job, "_gone_method", "class")],
    )
    worker = OptimaWorker([get_queue("default")], connection=queue_redis)
    assert rqcompat.missing_members([worker]) == [
        "queues.worker.adapter.OptimaWorker._no_such_member",
        "rq.job.Job._gone_method",
    ]


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


# -- the scan: any private member of rq, rq-scheduler or django-rq used outside rqcompat --------------
LIBRARIES = ("rq", "rq_scheduler", "django_rq")
SCANNED = ("queues", "features")
# name -> why it is the project's own although one of the libraries defines it too, for the cases the
# automatic collection (``project_privates``) cannot tell. Empty today.
PROJECT_NAMES = {}


def is_private(name):
    """``_name``: one leading underscore; not a dunder, not ``_`` alone."""
    return len(name) > 1 and name.startswith("_") and not name.startswith("__")


def _assigned(target):
    if isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _assigned(element)
    elif isinstance(target, ast.Starred):
        yield from _assigned(target.value)
    elif isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Attribute):
        yield target.attr


def _defined(node):
    """The names ``node`` itself defines: a function, method or class, or assignment targets."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [name for target in node.targets for name in _assigned(target)]
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return list(_assigned(node.target))
    return []


@cache
def library_privates():
    """Every ``_name`` the installed rq, rq-scheduler and django-rq define, read from their source."""
    names = set()
    for library in LIBRARIES:
        for location in importlib.util.find_spec(library).submodule_search_locations:
            for path in Path(location).rglob("*.py"):
                names.update(name for node in ast.walk(ast.parse(path.read_text())) for name in _defined(node))
    return frozenset(filter(is_private, names))


def _root(expression):
    while isinstance(expression, (ast.Attribute, ast.Call, ast.Subscript)):
        expression = expression.func if isinstance(expression, ast.Call) else expression.value
    return expression.id if isinstance(expression, ast.Name) else None


def _library_imports(tree):
    """Names bound in ``tree`` by an import from one of the libraries."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in LIBRARIES:
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(
                alias.asname or alias.name.split(".")[0]
                for alias in node.names
                if alias.name.split(".")[0] in LIBRARIES
            )
    return names


def _subclasses_of_libraries(tree, known):
    """The classes of ``tree`` whose bases come from a library, or are among ``known`` (class names)."""
    imported = _library_imports(tree)
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and any(_root(base) in imported or _root(base) in known for base in node.bases)
    ]


def _outside(node, skipped):
    yield node
    for child in ast.iter_child_nodes(node):
        if child not in skipped:
            yield from _outside(child, skipped)


class PrivateUseScan:
    """Finds, in this project's source, uses of private members of rq, rq-scheduler and django-rq.

    A use is an attribute (``x._name``, ``getattr(x, "_name")``), an import (``from rq.x import
    _name``), or a method of a subclass of one of their classes overriding a private method that
    ``rqcompat.MEMBERS`` does not list. A name counts as a library's when one of them defines it and
    the project does not; what the project defines is collected from its source, except the methods
    and attributes of its subclasses of library classes (those are rq's names, overridden).
    """

    def __init__(self, sources):
        trees = [ast.parse(source) for source in sources]
        self.theirs = library_privates()
        self.listed = {name for _, name, _ in rqcompat.MEMBERS}
        self.subclass_names = set()
        while True:
            found = {node.name for tree in trees for node in _subclasses_of_libraries(tree, self.subclass_names)}
            if found <= self.subclass_names:
                break
            self.subclass_names |= found
        ours = set(PROJECT_NAMES)
        for tree in trees:
            skipped = set(_subclasses_of_libraries(tree, self.subclass_names))
            ours.update(name for node in _outside(tree, skipped) for name in _defined(node))
        self.foreign = self.theirs - ours

    def findings(self, source, filename):
        """["file:line: _name (how it is used)", ...]"""
        tree = ast.parse(source)
        found = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in self.foreign:
                found.append((node.lineno, node.attr, "attribute"))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in self.foreign
            ):
                found.append((node.lineno, node.args[1].value, f"{node.func.id}()"))
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in LIBRARIES:
                found += [(node.lineno, alias.name, "import") for alias in node.names if alias.name in self.theirs]
        for cls in _subclasses_of_libraries(tree, self.subclass_names):
            found += [
                (method.lineno, method.name, f"override in {cls.name}")
                for method in cls.body
                if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef))
                and method.name in self.theirs
                and method.name not in self.listed
            ]
        return [f"{filename}:{line}: {name} ({how})" for line, name, how in sorted(found)]


def project_sources():
    """{path relative to the project: source} of every module scanned, rqcompat.py aside."""
    paths = [path for folder in SCANNED for path in sorted((ROOT / folder).rglob("*.py"))]
    return {str(path.relative_to(ROOT)): path.read_text() for path in paths if path != ROOT / "queues" / "rqcompat.py"}


@pytest.fixture(scope="module")
def scan():
    return PrivateUseScan(project_sources().values())


def test_no_module_outside_rqcompat_uses_a_private_member_of_rq_rq_scheduler_or_django_rq(scan):
    found = [line for filename, source in project_sources().items() for line in scan.findings(source, filename)]
    assert found == [], (
        "These use a private member of rq, rq-scheduler or django-rq: call a function of queues/rqcompat.py "
        "instead (add one, and list the member in rqcompat.MEMBERS; an override only needs the listing). "
        "If the name is the project's own, the scan could not tell: add it to PROJECT_NAMES with why.\n"
        + "\n".join(found)
    )


def test_rqcompat_lists_every_private_member_it_uses(scan):
    source = (ROOT / "queues" / "rqcompat.py").read_text()
    used = {finding.split(": ")[1].split(" ")[0] for finding in scan.findings(source, "queues/rqcompat.py")}
    assert sorted(used - scan.listed) == []


def test_the_scan_reports_a_private_rq_member_nobody_listed_yet(scan):
    source = "def start(worker):\n    worker._start_scheduler()\n    return getattr(worker, '_horse_pid')\n"
    assert scan.findings(source, "example.py") == [
        "example.py:2: _start_scheduler (attribute)",
        "example.py:3: _horse_pid (getattr())",
    ]


def test_the_scan_reports_imports_and_unlisted_overrides_but_not_the_projects_own_names(scan):
    source = (
        "from rq import Worker\nfrom rq.utils import _TIMESTAMP_FORMAT\n\n\n"
        "class Mine(Worker):\n"
        "    def _start_scheduler(self):\n        pass\n\n"
        "    def _set_connection(self, connection):\n        self._sleep(1)\n"  # scanned text, not a call
    )
    assert "_sleep" in scan.theirs  # rq has one, and so does queues/worker/dequeue.py
    assert scan.findings(source, "example.py") == [
        "example.py:2: _TIMESTAMP_FORMAT (import)",
        "example.py:9: _set_connection (override in Mine)",
    ]


def test_rq_s_serializer_lookup_is_remembered_and_still_refuses_what_rq_refuses():
    """``rqcompat.memoize_serializer_lookup`` (QueuesConfig.ready): rq's modules resolve through the memo,
    which answers as rq does and raises rq's error for a serializer without dumps/loads."""
    import importlib

    from rq import serializers

    for name in rqcompat.RESOLVERS:
        module = importlib.import_module(name)
        if hasattr(module, "resolve_serializer"):
            assert module.resolve_serializer is rqcompat.resolve_serializer, name
    assert serializers.resolve_serializer is not rqcompat.resolve_serializer  # rq's own stays rq's
    for given in (None, "json", serializers.JSONSerializer, "rq.serializers.JSONSerializer"):
        assert rqcompat.resolve_serializer(given) is serializers.resolve_serializer(given)
        assert rqcompat.resolve_serializer(given) is rqcompat.resolve_serializer(given)
    with pytest.raises(NotImplementedError, match="dumps, loads"):
        rqcompat.resolve_serializer(object)
    unhashable = type(
        "ListSerializer", (list,), {"dumps": staticmethod(lambda o: b""), "loads": staticmethod(lambda s: None)}
    )([1])  # non-empty: rq takes a falsy serializer for its default
    assert rqcompat.resolve_serializer(unhashable) is unhashable  # not remembered, resolved by rq as before
