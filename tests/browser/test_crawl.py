"""The crawl (issue 24): every panel and admin page of the queues app, with jobs in every state, at
1,280, 1,400 and 1,920 px, light and dark, in a real Chromium against the live site and a real Redis.

Every problem is collected before the test fails, one line each: "<page>, <width>, <scheme>: <problem>".
On each page: no console error or uncaught exception, no request failing (nor any subresource answering
>= 400), nothing wider than the window, no table wider than its container unless it scrolls inside its
own box (``overflow-x: auto``) with its first column kept (``position: sticky; left: 0``), and text that
can be read against its background, no word broken in the middle by a line break (tests/support/words.py), the
admin's navigation sidebar open (as an operator browses) and, in both schemes at the narrowest width (1,280 px:
where tables scroll in their own box, the layout axe's rules can tell apart), no serious or critical accessibility
violation found by axe-core (tests/support/axe.py), named by rule and node. axe runs at 1,280 px only: each of its
runs took 35-57 s of a crawl, and the wider layouts only add room (CI time, issue 36).

Each width and scheme is its own test (``test_every_page[1280-light]``, ``[1280-dark]``, ... ``[1920-dark]``), each
seeding its own jobs and rows (function-scoped, as every django_db(transaction=True) test must be): xdist spreads
the six over its workers. What runs once is shared out, so no one test carries it all: 1,280 px light reads the
pages' words (``WRONG_WORDS``) and shoots some of docs/operator.md's screenshots (``the_pages``: into docs/img/
with OPTIMA_SCREENSHOTS=1, ``python3 dev.py screenshots``, which runs that test alone; else into the test's tmp
directory); 1,920 px dark checks that every same-origin link of every page answers 200 with the logged-in session.
One runs alone with ``pytest "tests/browser/test_crawl.py::test_every_page[1400-dark]"``.
"""

import datetime as dt
from urllib.parse import urldefrag, urlsplit

import pytest
from rq.worker import Worker

import queues
from queues import audit
from queues.catalog.lookup import OptimaJob, get_queue, queue_names
from queues.failures import deadletter
from queues.models import DeadLetter, FailureGroup
from queues.periodic import schedules
from tests.support import wait_for
from tests.support.axe import serious_violations
from tests.support.panel import dead_job
from tests.support.words import BROKEN_WORDS_JS

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.crawl, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-the-crawl-1"
WIDTHS = (1280, 1400, 1920)
SCHEMES = ("light", "dark")
JOB = "tests.jobs.sample.add"

# Run in each page: the layout and contrast problems it sees, as sentences.
# What the panel once said where the API and docs say otherwise (issue 24): never on any page again.
WRONG_WORDS = {
    "Django RQ": "Queues",
    "RATE_LIMITED": "held",
    "rate_limited": "held",
    "started started": "started since",
}

LAYOUT_JS = r"""
() => {
  const problems = [];
  const doc = document.documentElement;
  if (doc.scrollWidth > window.innerWidth) {
    problems.push(`the page is ${doc.scrollWidth} px wide in a ${window.innerWidth} px window`);
  }
  const name = (el) => el.id ? `#${el.id}` : (el.className && typeof el.className === "string"
    ? `${el.tagName.toLowerCase()}.${el.className.trim().split(/\s+/).join(".")}` : el.tagName.toLowerCase());
  for (const table of document.querySelectorAll("table")) {
    if (!table.offsetParent) continue;  // not displayed
    const container = table.parentElement;
    if (table.offsetWidth <= container.clientWidth + 1) continue;
    let box = container, scrolls = null;
    while (box && box !== document.body) {
      const overflow = getComputedStyle(box).overflowX;
      if (overflow === "auto" || overflow === "scroll") { scrolls = box; break; }
      box = box.parentElement;
    }
    const widest = [...(table.rows[0] ? table.rows[0].cells : [])].map((c) => [c.offsetWidth, c])
      .sort((a, b) => b[0] - a[0]).slice(0, 3).map(([w, c]) => `${c.className || c.textContent.trim()} ${w} px`);
    const what = `table ${name(table)} (${table.offsetWidth} px in a ${container.clientWidth} px box; ` +
                 `widest columns: ${widest.join(", ")})`;
    if (!scrolls) { problems.push(`${what} is wider than its container`); continue; }
    const firstCells = table.querySelectorAll("tr > :first-child");
    const loose = [...firstCells].filter((c) => {
      const s = getComputedStyle(c);
      return s.position !== "sticky" || parseFloat(s.left) !== 0;
    });
    if (loose.length) problems.push(`${what} scrolls in ${name(scrolls)} but its first column is not sticky`);
  }
  // Readable text: every element holding its own text, against the first opaque background behind it.
  const rgba = (c) => { const m = c.match(/[\d.]+/g) || []; return m.map(Number).concat([1]).slice(0, 4); };
  const lum = ([r, g, b]) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgba(getComputedStyle(e).backgroundColor);
      if (c[3] > 0.5) return c;
    }
    return rgba(getComputedStyle(document.body).backgroundColor);
  };
  let unreadable = 0;
  for (const el of document.querySelectorAll("#content *, #header *, .breadcrumbs *, .breadcrumbs")) {
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || !el.offsetParent || el.closest("svg")) continue;
    const fg = rgba(getComputedStyle(el).color), bg = background(el);
    const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
    const ratio = (a + 0.05) / (b + 0.05);
    if (ratio < 3 && unreadable++ < 3) {
      const text = el.textContent.trim().slice(0, 40);
      problems.push(`"${text}" (${name(el)}) is unreadable: ${getComputedStyle(el).color} on ` +
                    `rgb(${bg.slice(0, 3).join(", ")}), contrast ${ratio.toFixed(2)}`);
    }
  }
  return problems;
}
"""

# The admin's navigation sidebar open, as Django's nav_sidebar.js reads it (the page's own state, first visit).
SIDEBAR_OPEN_JS = "localStorage.setItem('django.admin.navSidebarIsOpen', 'true')"
SIDEBAR_JS = """() => { const bar = document.getElementById("nav-sidebar");
  return !bar ? "none" : (getComputedStyle(bar).display !== "none" && bar.offsetWidth > 0 ? "open" : "closed"); }"""
BROKEN_SHOWN = 5  # broken words named per page

LINKS_JS = """() => [...document.querySelectorAll("a[href]")]
  .filter((a) => !a.getAttribute("href").startsWith("#") && !a.getAttribute("href").startsWith("javascript:"))
  .map((a) => a.href)"""


@pytest.fixture
def crawler(django_user_model):
    return django_user_model.objects.create_superuser("crawler", password=PASSWORD)


def index_of(name):
    """django-rq's queue index: the declared queues sorted by name (queues/board/lookups.py)."""
    return sorted(queue_names()).index(name)


def jobs_in_every_state(queue_redis, start_worker, tmp_path):
    """One job (or row) per state the panel shows, a worker holding the started one; -> {state: job id}."""
    finished = queues.enqueue("default", JOB, 1, 2)
    failed = queues.enqueue("default", "tests.jobs.sample.fail", "payload-for-the-crawl", attempts=1)
    started = queues.enqueue("default", "tests.jobs.panel.report_progress_and_wait", str(tmp_path / "release"), 2, 5)
    start_worker("default")
    wait_for(
        lambda: OptimaJob.fetch(started.id, connection=queue_redis).meta.get("progress"),
        timeout=60,
        message="the worker to hold the started job",
    )
    wait_for(
        lambda: DeadLetter.objects.filter(job_id=failed.id).exists(),
        timeout=60,
        message="the failed job mirrored to a dead letter",
    )
    assert OptimaJob.fetch(finished.id, connection=queue_redis).get_status() == "finished"
    ids = {"finished": finished.id, "failed": failed.id, "started": started.id}
    ids["high"] = queues.enqueue("default", JOB, 3, 4, priority=5).id
    ids["queued"] = queues.enqueue("default", JOB, 5, 6).id
    ids["low"] = queues.enqueue("default", JOB, 7, 8, priority=-5).id
    ids["scheduled"] = queues.enqueue("default", JOB, 9, 10, delay=3600).id
    ids["limited"] = queues.enqueue("default", JOB, 11, limit_key="seller:1", limit_concurrency=1).id
    ids["held"] = queues.enqueue("default", JOB, 12, limit_key="seller:1", limit_concurrency=1).id
    canceled = queues.enqueue("default", JOB, 15, 16)
    assert queues.cancel(canceled.id).outcome == "canceled"
    ids["canceled"] = canceled.id
    for i in range(2):  # dead letters and a failure group with the long ids and messages of real ones
        job, _ = dead_job(
            "default",
            "features.orders.jobs.sync_orders_of_a_cabinet",
            row=False,
            job_id=f"schedule-orders-sync-cabinet-{i}-0123456789abcdef0123456789abcdef",
        )
        job.meta.update(
            {
                "exc_type": "requests.exceptions.HTTPError",
                "deaths": 2,
                "exc_message": f"404 Client Error: Not Found for url: http://127.0.0.1:8765/api/v1/"
                f"cabinets/{i}/orders?page=1&page_size=100&updated_since=2026-12-01T00:00:00Z",
                "dead_at": dt.datetime.now(dt.UTC).isoformat(),
            }
        )
        job.save_meta()
        deadletter.mirror(job)
    audit.record("crawler", "pause", queue="default")
    audit.record("crawler", "resume", queue="default", detail="the crawl's audit row " + "with a long detail " * 8)
    return ids


def batches_of_every_kind(tmp_path):
    """A running batch with a long description and callbacks, and a chain; -> (the batch's id, the job id of the
    chain's first step)."""
    record = str(tmp_path / "batch-runs.txt")
    with queues.batch(
        on_success=queues.call("default", "tests.jobs.batches.callback", record, "success"),
        on_death=queues.call("default", "tests.jobs.batches.callback", record, "death"),
        description="sync of every cabinet of seller 7 " + "with a long description " * 8,
    ) as b:
        queues.enqueue("default", "tests.jobs.batches.member", record, 1, delay=3600)
    chain = queues.chain(
        queues.call("default", "tests.jobs.batches.add", record, 1),
        queues.call("default", "tests.jobs.batches.add", record, 2),
    )
    return b.id, queues.chain_state(chain.id).steps[0].job_ids[0]


def the_pages(ids, batch_id, chain_job, queue_redis):
    """Every page of the panel and of the queues admin, with jobs in every state; -> [(url, screenshot name or
    "")]: the images of docs/operator.md no flow test shoots (tests/browser/test_panel.py and
    test_batches_pages.py shoot the home, a failed job, the dead letters, the audit trail and the batches)."""
    q = index_of("default")
    dead = DeadLetter.objects.get(job_id=ids["failed"])
    group = FailureGroup.objects.get(fingerprint=dead.fingerprint)
    workers = Worker.all(queue=get_queue("default"))
    assert len(workers) == 1, f"{len(workers)} workers registered on the queue default, not 1"
    worker = workers[0].key
    panel = "/admin/queues/"
    job = f"{panel}queues/{q}/"
    return [
        (panel, ""),
        (f"{panel}queues/{q}/", "queue-page"),
        (f"{panel}queues/{q}/details/", ""),
        *[(f"{panel}queues/{q}/{tab}/", "") for tab in ("finished", "failed", "scheduled", "started", "deferred")],
        (f"{panel}queues/{q}/canceled/", ""),
        (f"{panel}workers/{q}/", "workers"),
        (f"{panel}workers/{q}/{worker}/", ""),
        (f"{panel}schedulers/{q}/", ""),
        *[(f"{job}{job_id}/", "" if state == "failed" else "") for state, job_id in ids.items()],
        (f"{job}{ids['failed']}/delete/", ""),  # an action's confirmation
        (f"{job}{ids['failed']}/requeue/", ""),
        (f"{job}{ids['started']}/stop/", ""),
        (f"{job}{ids['queued']}/cancel/", ""),
        (f"{panel}queues/{q}/empty/", ""),
        (f"{panel}queues/{q}/requeue-all/", ""),
        (f"{panel}find/?job_id={ids['held']}", ""),
        (f"{panel}find/?job_id=no-such-job", ""),
        (f"{panel}periodic/", "periodic-jobs"),  # dev.py run's own schedules (features/orders) and the tests'
        (f"{panel}search/", ""),
        (f"{panel}search/?q=sample&queue=default", "panel-search"),
        (f"{panel}batches/", ""),
        (f"{panel}batches/{batch_id}/", ""),
        (f"{panel}batches/{batch_id}/?state=finished", ""),
        (f"{panel}batches/{batch_id}/cancel/", ""),
        (f"{job}{chain_job}/", ""),  # a chain's step: its batch and the chain's steps
        ("/admin/queues/deadletter/", ""),
        (f"/admin/queues/deadletter/{dead.pk}/change/", ""),
        ("/admin/queues/failuregroup/", ""),
        (f"/admin/queues/failuregroup/{group.pk}/change/", ""),
        ("/admin/queues/auditentry/", ""),
        ("/admin/queues/outboxentry/", ""),
    ]


def log_in(browser, live_server, panel):
    """The crawler's session (cookies), logged in through the admin's login form."""
    login = browser.new_context()
    page = login.new_page()
    page.goto(f"{live_server.url}/admin/login/?next={panel}")
    page.fill("#id_username", "crawler")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}{panel}")
    session = login.storage_state()
    login.close()
    return session


@pytest.mark.parametrize(("width", "scheme"), [(width, scheme) for width in WIDTHS for scheme in SCHEMES])
def test_every_page(
    browser, live_server, prod, crawler, queue_redis, start_worker, lifecycle_schedules, tmp_path, shoot, width, scheme
):
    """Every page at one width in one scheme (test_every_page[1280-light], ...): each its own test, with its own
    data, so xdist spreads the six over its workers. The first (1,280 px, light) also reads the pages' words and
    shoots docs/operator.md's images; the last (1,920 px, dark) checks every same-origin link; the two at 1,280 px run
    axe on every page."""
    first = (width, scheme) == (WIDTHS[0], SCHEMES[0])
    last = (width, scheme) == (WIDTHS[-1], SCHEMES[-1])
    audited = width == WIDTHS[0]  # axe: the narrowest width, in both schemes
    ids = jobs_in_every_state(queue_redis, start_worker, tmp_path)
    schedules.register(queue_redis)
    batch_id, chain_job = batches_of_every_kind(tmp_path)
    panel = "/admin/queues/"
    pages = the_pages(ids, batch_id, chain_job, queue_redis)
    problems, links = [], {}
    session = log_in(browser, live_server, panel)

    seen = []  # what went wrong on the page being crawled (cleared for each page)
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme, storage_state=session)
    context.add_init_script(SIDEBAR_OPEN_JS)
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.on("console", lambda m: m.type == "error" and seen.append(f"console error: {m.text}"))
    page.on("pageerror", lambda e: seen.append(f"JavaScript error: {e}"))
    page.on("requestfailed", lambda r: seen.append(f"request failed: {r.url} ({r.failure})"))
    page.on(
        "response",
        lambda r: (
            r.status >= 400 and seen.append(f"{r.url} answered {r.status} (from {r.request.header_value('referer')})")
        ),
    )
    for url, shot in pages:
        seen.clear()
        response = page.goto(f"{live_server.url}{url}")
        page.wait_for_load_state("load")
        if response is None or response.status != 200:
            seen.append(f"answered {response and response.status}, not 200")
        # jQuery rethrows an error of a ready handler from a timer: let the page's timers run first.
        page.evaluate("() => new Promise((done) => setTimeout(done, 20))")
        seen.extend(page.evaluate(LAYOUT_JS))
        seen.extend(page.evaluate(BROKEN_WORDS_JS, BROKEN_SHOWN))
        if page.evaluate(SIDEBAR_JS) == "closed":
            seen.append("the admin's navigation sidebar is closed")
        if audited:
            seen.extend(serious_violations(page))
        if first:
            if shot:
                shoot(page, shot)
            text = page.inner_text("body")
            seen.extend(
                f"says {word!r} where the API and docs say {right!r}"
                for word, right in WRONG_WORDS.items()
                if word in text
            )
        if last:
            for href in page.evaluate(LINKS_JS):
                href = urldefrag(href).url
                if urlsplit(href).netloc == urlsplit(live_server.url).netloc and "logout" not in href:
                    links.setdefault(href, url)
        problems.extend(f"{url}, {width}, {scheme}: {problem}" for problem in dict.fromkeys(seen))
    context.close()

    checker = browser.new_context(storage_state=session)
    for href, found_on in links.items():
        status = checker.request.get(href, max_redirects=0).status
        if status != 200:
            problems.append(f"{found_on}, -, -: link {href.removeprefix(live_server.url)} answered {status}")
    checker.close()
    (tmp_path / "release").touch()  # the started job ends: the worker stops at once, not after its grace
    assert not problems, f"{len(problems)} problems in the crawl:\n" + "\n".join(problems)
