"""Text matching on the jobs' raw JSON first (queues/search/find.py ``_may_hold``): a job whose raw payload
cannot hold the text is skipped unparsed, and the results are exactly those of matching the parsed
arguments — whatever the escapes (rq writes non-ASCII as ``\\uXXXX``), quotes, backslashes and case."""

import json
import zlib

import pytest

import queues
from queues.keyspace import entries, keys
from queues.search import find, verify
from tests.jobs import sample

ARGUMENTS = [
    ((), {"message": "Кабинет №42, ул. Ленина"}),
    (("ПРОДАВЕЦ Straße",), {}),
    (('a "quoted" word and a back\\slash',), {}),
    (("line\nbreak, tab\tand \x1f and \x7f",), {}),
    (("café 😀 naïve",), {}),
    (("literal \\u00e9 text",), {}),
    ((), {"message": {"nested": ["Ünïcode", 1.5, None, True, [1, [2]]]}}),
    (([["cabinet", 7]],), {}),
]
TEXTS = [
    "кабинет №42",
    "КАБИНЕТ",
    "ул. ленина",
    "продавец",
    "strasse",
    "STRASSE",
    '"quoted"',
    'a \\"quoted',
    "back\\\\slash",
    "\\n",
    "\\t",
    "u001f",
    "\\u001f",
    "\x7f",
    "u007f",
    "café",
    "CAFÉ",
    "😀",
    "ud83d",
    "\\u00e9",
    "u00e9",
    "é text",
    "ünïcode",
    '"nested": ["',
    "1.5, null, true",
    "[1, [2]]",
    "[[",
    '[["cabinet',
    '[[["cabinet", 7]]',
    "], {",
    "{}]",
    '"message": {',
    "tests.jobs.sample.fail",
    "no such text",
]


DESCRIPTION = "a job"  # each job's description, in place of rq's (which repeats the arguments): they alone match


def expected(job, text):
    """What ``search_jobs`` matched before the raw test: the id, the description, or the parsed arguments."""
    wanted = text.strip().casefold()
    arguments = json.dumps([list(job.args), job.kwargs], ensure_ascii=False, default=str)
    return any(wanted in part.casefold() for part in (job.id, DESCRIPTION, arguments))


@pytest.fixture
def jobs(admin_redis):
    made = [queues.enqueue_call("default", sample.fail, args, kwargs) for args, kwargs in ARGUMENTS]
    for job in made:
        admin_redis.hset(keys.job_key(job.id), "description", DESCRIPTION)
    return made


@pytest.mark.parametrize("text", TEXTS)
def test_the_raw_json_test_finds_exactly_what_the_parsed_arguments_hold(jobs, text):
    found = {hit.job_id for hit in queues.search_jobs(text=text).hits}
    assert found == {job.id for job in jobs if expected(job, text)}


def test_cyrillic_text_is_found_whatever_its_case_though_rq_stores_it_escaped(jobs, admin_redis):
    raw, _whole = entries.inflate(admin_redis.hget(keys.job_key(jobs[0].id), "data"), entries.JOB_BYTES)
    assert b"\\u041a" in raw and "Кабинет".encode() not in raw  # rq's JSON: non-ASCII escaped
    assert [h.job_id for h in queues.search_jobs(text="КАБИНЕТ №42").hits] == [jobs[0].id]
    assert [h.job_id for h in queues.search_jobs(text="кабинет").hits] == [jobs[0].id]
    assert [h.job_id for h in queues.search_jobs(text="продавец straße").hits] == [jobs[1].id]
    assert [h.job_id for h in queues.search_jobs(text="u041a").hits] == []  # the escape is not the text


def test_a_job_s_raw_text_is_not_parsed_when_it_cannot_match(jobs, monkeypatch):
    parsed = []
    real = find._parse
    monkeypatch.setattr(find, "_parse", lambda inflated: parsed.append(inflated) or real(inflated))
    assert queues.search_jobs(text="no such text").hits == []
    assert parsed == []
    assert [h.job_id for h in queues.search_jobs(text="naïve").hits] == [jobs[4].id]
    assert len(parsed) == 1  # the one job whose raw text may hold it (then parsed once: matched, then shown)


@pytest.mark.parametrize(
    "payload",
    [
        b'["tests.jobs.sample.fail", null, ["x"], {}]',
        b'  \n["tests.jobs.sample.fail", null, [], {}]',
        b'\xef\xbb\xbf["tests.jobs.sample.fail", null, [], {}]',  # a BOM: json reads it, the opening does not
        b'["a\\"quoted\\u00e9name", null, [], {}]',
        b'["\\x-not-an-escape", null, [], {}]',
        b'["tests.jobs.sample.fail", null, [], {}, "a fifth item"]',
        b'["tests.jobs.sample.fail", null, [oops], {}]',
        b"[7, null, [], {}]",
        b'{"not": "a list"}',
        b'["' + b"n" * 3000 + b'", null, [], {}]',
        b'["tab\tin the name", null, [], {}]',
    ],
)
def test_a_function_read_from_the_opening_is_the_one_the_parsed_payload_gives(payload):
    data = zlib.compress(payload)
    job = find._Job("job", (b"queued", b"default", data, b"", None, None, None))
    assert job.function() == verify.function_of(find._parse(find._inflate(data)), data)
