"""README.md's "one enqueue to try", replayed as written against the site in dev: no token, no login, 202."""

import json
import re
import shlex
from urllib.parse import urlsplit

import pytest
from django.test import Client

import queues
from tests.support import ROOT

TRY = re.compile(r"<!-- readme: try -->\n```sh\n(?P<code>.*?)```", re.S)


def the_curl():
    """(method, path, headers, body) of the README's curl line."""
    [block] = TRY.findall((ROOT / "README.md").read_text())
    [argv] = [shlex.split(line) for line in block.splitlines() if line.strip()]
    assert argv[0] == "curl"
    method, headers, body, url = "GET", {}, None, None
    words = iter(argv[1:])
    for word in words:
        if word == "-X":
            method = next(words)
        elif word == "-H":
            name, _, value = next(words).partition(":")
            headers[name.strip()] = value.strip()
        elif word == "-d":
            body = next(words)
        elif not word.startswith("-"):
            url = word
    return method, urlsplit(url).path, headers, body


@pytest.mark.django_db(transaction=True)
def test_the_readmes_enqueue_works_in_dev_without_a_token(settings):
    settings.OPTIMA_ENV = "dev"
    method, path, headers, body = the_curl()
    anonymous = Client()
    response = anonymous.generic(method, path, body, content_type=headers["Content-Type"])
    assert response.status_code == 202, response.content
    answer = response.json()
    job = queues.fetch_job(answer["job_id"])
    assert (job.origin, job.func_name, list(job.args)) == ("orders-sync", "features.orders.jobs.sync_cabinet", [1])
    assert json.loads(body) == {"cabinet_id": 1}
    assert anonymous.get(answer["status_url"]).status_code == 200
