"""The screenshots of docs/operator.md, made from the running pages (issue 33): ``python3 dev.py screenshots``.

Every image docs/operator.md shows (``![...](img/<name>.png)``) is shot by a browser test as it passes through
the page, against pytest-django's live server with a real Redis, real workers and the jobs the test seeded
(tests/browser/conftest.py's ``shoot``): the crawl at 1,280 px, light (tests/browser/test_crawl.py
``test_every_page[1280-light]``, the one of its six tests that shoots, ``the_pages``: the home, queue, workers, job,
periodic, search and batch pages and the dead-letter admin) and the tests of a flow (tests/browser/test_panel.py:
a paused queue, a dead letter's confirmation). This script runs those tests
with ``OPTIMA_SCREENSHOTS=1`` (the images go to docs/img/, not the tests' tmp directories), one process, then
checks that every image the guide shows was written by this run, and names any that was not.

    python3 dev.py screenshots               # or: .venv/bin/python devtools/screenshots.py
"""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "operator.md"
IMG = ROOT / "docs" / "img"
TESTS = [  # the browser tests that shoot the guide's images
    "tests/browser/test_crawl.py::test_every_page[1280-light]",  # the crawl's other widths and schemes shoot nothing
    "tests/browser/test_panel.py",
    "tests/browser/test_batches_pages.py",
]


def shown(guide=GUIDE):
    """The image names docs/operator.md shows, in order (``img/<name>.png``)."""
    return list(dict.fromkeys(re.findall(r"\]\(img/([\w-]+)\.png\)", guide.read_text())))


def main(argv):
    started = time.time()
    env = dict(os.environ, OPTIMA_SCREENSHOTS="1")
    code = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:randomly", *TESTS, *argv], cwd=ROOT, env=env
    ).returncode
    stale = [
        name
        for name in shown()
        if not (IMG / f"{name}.png").exists() or (IMG / f"{name}.png").stat().st_mtime < started
    ]
    if stale:
        print(f"* not written by this run (no test shoots them, or it failed first): {', '.join(stale)}")
    else:
        print(f"* {len(shown())} images of docs/operator.md written to {IMG.relative_to(ROOT)}/")
    return code or (1 if stale else 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
