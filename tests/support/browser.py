"""Signing in through the admin's login page in a Playwright page (tests/browser/)."""

PASSWORD = "pw-for-browser-1"


def log_in(page, live_server, next_url="/admin/queues/"):
    page.goto(f"{live_server.url}/admin/login/?next={next_url}")
    page.fill("#id_username", "operator")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}{next_url}")
