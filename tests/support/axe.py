"""axe-core in a Playwright page (the crawl: tests/browser/test_crawl.py): the serious and critical
accessibility violations of the page, one sentence per rule and node.

axe-core (Deque, MPL-2.0) comes bundled in the PyPI package ``axe-playwright-python`` (pinned in
requirements-dev.txt): nothing is downloaded at test time. Its script is injected into the page and
``axe.run`` runs there, on the rendered DOM (so colour contrast is judged in the page's own scheme).
"""

from axe_playwright_python.sync_playwright import Axe

FAILING = ("serious", "critical")  # axe's impacts that fail the crawl ("minor" and "moderate" do not)
NODES_SHOWN = 3  # per rule: the first nodes named, then how many more

_axe = Axe()


def serious_violations(page):
    """["<rule> (<impact>): <help> at <selector> (<summary>)", ...] of the page's violations whose impact is
    in ``FAILING``."""
    # preload off: axe's CSSOM preload fetches a stylesheet's @import relative to the page, not to the sheet
    # (admin/css/forms.css's widgets.css answered 404 on every page that loads it).
    results = _axe.run(page, options={"resultTypes": ["violations"], "preload": False})
    found = []
    for violation in results.response["violations"]:
        nodes = [n for n in violation["nodes"] if (n.get("impact") or violation["impact"]) in FAILING]
        for node in nodes[:NODES_SHOWN]:
            target = " ".join(str(t) for t in node["target"])
            summary = " ".join((node.get("failureSummary") or "").split())[:200]
            found.append(f"axe {violation['id']} ({violation['impact']}): {violation['help']} at {target} ({summary})")
        if len(nodes) > NODES_SHOWN:
            found.append(f"axe {violation['id']}: and {len(nodes) - NODES_SHOWN} more nodes")
    return found
