"""The docs name only files that exist.

README.md and docs/*.md name repository paths three ways: in full (``queues/worker/dequeue.py``,
``tests/queues/...``, ``features/orders/``), relative to ``queues/`` (``worker/dequeue.py``, ``board/``), and
as a bare file name (``gate.py``); docs/architecture.md also draws ``queues/`` as a tree. Each must exist
in this checkout: a renamed or moved module fails here with the doc, the line and the path.
"""

import functools
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Folders at the top of the repository: a path starting with one of them is a path of this checkout.
TOP = (".ci", "bench", "deploy", "devtools", "docs", "features", "optima_site", "queues", "templates", "tests")
# queues/'s subpackages: ``worker/intake.py`` in prose means ``queues/worker/intake.py``.
# (``templates/`` is the site's own, a top-level folder, not ``queues/templates/``.)
ROOMS = tuple(
    p.name for p in (ROOT / "queues").iterdir() if p.is_dir() and not p.name.startswith("__") and p.name not in TOP
)

# A path starts after a space, a bracket or a backtick; not after ``/``, ``.``, ``:`` or a word character
# (``/admin/queues/`` is a URL, ``features/orders/jobs.py``'s ``jobs.py`` part of a longer path), nor inside
# a quoted string of a code sample (``path("admin/queues/", ...)`` is a URL pattern).
_START = r"(?<![\w/.:@\"'-])"
_FULL = re.compile(_START + r"((?:" + "|".join(re.escape(t) for t in TOP) + r")/[\w./-]*)")
_ROOM = re.compile(_START + r"((?:" + "|".join(ROOMS) + r")/[\w./-]*)")
_BARE = re.compile(_START + r"([\w-]+\.py)\b")
_TREE = re.compile(r"^([│ ]*)[├└]── (.*)$")
# Placeholders and globs: a shape, not a file.
_PLACEHOLDER = re.compile(r"[<>*{}]|\.\.\.")

# Bare file names that are not ours: an adopting project's files, and third-party ones the docs discuss.
OUTSIDE = {"manage.py", "settings.py", "urls.py", "wsgi.py", "asgi.py", "apps.py", "models.py", "views.py"}


@functools.cache
def _repo_files():
    """Every file and folder of the checkout, walked once (not per doc), without the venvs (.venv, and the bench's
    .venv-peers: tens of thousands of files; walking them took ~20 s of this module), .git and caches."""
    skip = {".git", "node_modules", "__pycache__"}
    files = set()
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in skip and not d.startswith(".venv")]
        rel = Path(folder).relative_to(ROOT)
        files.update((rel / d).as_posix() + "/" for d in dirs)
        files.update((rel / n).as_posix() for n in names)
    return files


# The feature docs/adding-a-feature.md builds, step by step: a feature the reader writes, not one of this
# repository (tests/features/newfeature/ is its tested copy).
EXAMPLES = ("features/stock/",)


def _exists(path):
    path = path.rstrip(".,;:)")
    if path.startswith(EXAMPLES):
        return True
    if (ROOT / path).exists():
        return True
    # A dotted name inside a module: ``failures/operations.requeue_failed``.
    module, dot, _name = path.rpartition("/")[2].partition(".")
    return bool(dot) and not path.endswith(".py") and (ROOT / path.rpartition("/")[0] / f"{module}.py").exists()


def _tree_paths(lines):
    """The paths drawn by a ``queues/`` tree in a fenced block: (line number, path)."""
    found = []
    in_tree = False
    stack = []
    for number, line in lines:
        if line.strip() == "queues/":
            in_tree, stack = True, ["queues"]
            continue
        if not in_tree:
            continue
        if line.startswith("```"):
            in_tree = False
            continue
        m = _TREE.match(line)
        if not m:
            continue
        depth = len(m.group(1)) // 4 + 1
        names = re.split(r"\s{2,}", m.group(2).strip())[0].split()
        del stack[depth:]
        for name in names:
            if name.endswith(".py") or name.endswith("/"):
                found.append((number, "/".join([*stack, name])))
        if len(names) == 1 and names[0].endswith("/"):
            stack.append(names[0].rstrip("/"))
    return found


def stale_in(doc, name):
    """Every (name, line, path) of one document whose path does not exist."""
    basenames = {Path(f.rstrip("/")).name for f in _repo_files()}
    lines = list(enumerate(doc.read_text().splitlines(), start=1))
    drawn = _tree_paths(lines)
    stale = [(name, number, path) for number, path in drawn if not _exists(path)]
    tree_lines = {number for number, _path in drawn}
    for number, line in lines:
        if number in tree_lines:  # its names are relative to the tree; its comment is prose
            line = re.split(r"\s{2,}", _TREE.match(line).group(2).strip(), maxsplit=1)[1:] or [""]
            line = line[0]
        for regex, prefix in ((_FULL, ""), (_ROOM, "queues/")):
            for m in regex.finditer(line):
                path = m.group(1)
                if not _PLACEHOLDER.search(path) and not _exists(prefix + path):
                    stale.append((name, number, path))
        for m in _BARE.finditer(line):
            if m.group(1) not in OUTSIDE and m.group(1) not in basenames:
                stale.append((name, number, m.group(1)))
    return stale


def test_every_path_the_docs_name_exists():
    stale = [entry for doc in DOCS for entry in stale_in(doc, doc.relative_to(ROOT).as_posix())]
    assert stale == [], "paths the docs name that do not exist:\n" + "\n".join(
        f"  {doc}:{line}: {path}" for doc, line, path in stale
    )


def test_a_stale_path_is_reported_with_its_doc_and_line(tmp_path):
    doc = tmp_path / "stale.md"
    doc.write_text(
        "Intro.\n\n"
        "See `queues/worker.py` and `board/operations.py`, `catalog.py`; `queues/worker/intake.py` is fine.\n"
        "```\nqueues/\n├── keys.py   every key\n├── worker/   the worker\n│   └── intake.py\n```\n"
    )
    assert stale_in(doc, "stale.md") == [
        ("stale.md", 6, "queues/keys.py"),
        ("stale.md", 3, "queues/worker.py"),
        ("stale.md", 3, "board/operations.py"),
        ("stale.md", 3, "catalog.py"),
    ]


def test_the_api_docs_demo_interval_is_the_codes(settings):
    from features import conf

    settings.OPTIMA_ENV = "dev"
    text = (ROOT / "docs" / "api.md").read_text()
    [said] = re.findall(r"cabinets 1-4 every (\d+) s", text)
    assert int(said) == conf.sync_interval()
