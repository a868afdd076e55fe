"""Browser tests: Playwright (sync API) driving Debian's chromium against pytest-django's live server.

Never ``playwright install``: the browser is the system's /usr/bin/chromium (.ci/run installs it).
Screenshots of the main pages are taken as the tests pass through them: into docs/img/ with
``OPTIMA_SCREENSHOTS=1`` (to refresh the docs), else into the test's tmp directory.
"""

import os
import shutil
from pathlib import Path

import pytest

from tests.support.browser import PASSWORD
from tests.support.panel import make_staff

# Playwright's sync API runs an event loop in this thread; the ORM calls of the tests are still
# synchronous and safe here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("OPTIMA_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
IMG = Path(__file__).resolve().parents[2] / "docs" / "img"


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not shutil.which(CHROMIUM) and not Path(CHROMIUM).exists():
        pytest.fail(
            f"{CHROMIUM} is missing: apt-get install -y --no-install-recommends chromium "
            "(.ci/run does it), or set OPTIMA_CHROMIUM to a Chromium binary."
        )
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1800, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield page
    context.close()


@pytest.fixture
def shoot(tmp_path):
    """``shoot(page, "name")`` saves <name>.png (full page; docs/img/ with OPTIMA_SCREENSHOTS=1)."""
    folder = IMG if os.environ.get("OPTIMA_SCREENSHOTS") == "1" else tmp_path

    def take(page, name):
        folder.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
        return folder / f"{name}.png"

    return take


@pytest.fixture
def operator(django_user_model):
    return make_staff(
        django_user_model,
        "operator",
        "queues.act_on_queue_panel",
        "queues.view_deadletter",
        "queues.act_on_deadletter",
        "queues.view_auditentry",
        password=PASSWORD,
    )
