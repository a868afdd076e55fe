"""The size-checked read of a job hash (queues/jobs/capped.py, read by queues/jobs/read.py): a hash planted far over
the caps never crosses the wire, and what is read of it is what a page and a corrupt dead letter need."""

import redis

from queues.failures.corrupt import decode_raw_hash, encode_raw_hash
from queues.jobs import capped
from queues.jobs import read as jobread
from queues.keyspace import entries, keys
from tests.support.panel import good_hash

BIG = 20 * 1024 * 1024


def sent_bytes(connection):
    return connection.info("stats")["total_net_output_bytes"]


def test_a_20_mb_hash_is_read_as_too_large_without_crossing_the_wire(private_redis):
    connection = redis.Redis.from_url(private_redis.url)
    raw = good_hash(connection)
    raw.update({b"description": b"d" * BIG, b"meta": b'{"x": "' + b"m" * BIG + b'"}'})
    connection.hset(keys.job_key("big"), mapping=raw)
    before = sent_bytes(connection)
    job = jobread.fetch("big", connection)
    assert sent_bytes(connection) - before < 256 * 1024  # the whole hash is 40 MB
    assert (job.kind, job.count) == ("too_large", len(raw))
    size = sum(len(k) + len(v) for k, v in raw.items())
    assert job.why == f"too large to read: its hash is over 256 KiB ({size} bytes as stored)"
    shown = dict(job.preview)
    assert shown["description"] == f"({BIG} bytes: too large to read)"  # Redis copies no value that large
    assert shown["origin"] == "default"  # a short value whole
    assert [name for name, _ in job.fields] == sorted(raw)  # every field, by name: fewer than RAW_FIELDS


def test_a_corrupt_dead_letter_of_a_hash_over_the_caps_keeps_its_first_fields_and_counts_the_rest(queue_redis):
    raw = good_hash(queue_redis)
    readable, unread = capped.READ_VALUE_BYTES, entries.READ_BYTES + 1
    raw.update({b"description": b"d" * readable, b"exc_info": b"m" * unread})
    raw.update({f"extra-{i:03}".encode(): b"x" for i in range(100)})
    queue_redis.hset(keys.job_key("wide"), mapping=raw)
    job = jobread.fetch("wide", queue_redis)
    assert (job.kind, job.count, len(job.fields)) == ("too_large", len(raw), entries.RAW_FIELDS)
    kept = decode_raw_hash(encode_raw_hash(dict(job.fields), job.count))
    assert [name for name, _ in kept[:-1]] == sorted(raw)[: entries.RAW_FIELDS]
    assert kept[-1] == ("…".encode(), f"(truncated: {len(raw) - entries.RAW_FIELDS} more fields not kept)".encode())
    description, meta = dict(kept)[b"description"], dict(kept)[b"exc_info"]
    assert description == b"d" * 2048 + f"… (truncated: {readable} bytes in all, the first 2048 kept)".encode()
    assert meta == f"… (truncated: {unread} bytes in all, the first 0 kept)".encode()  # too large to be read


def test_a_hash_with_more_fields_than_a_job_has_is_too_large_whatever_its_bytes(queue_redis):
    raw = good_hash(queue_redis)
    raw.update({f"f{i}".encode(): b"" for i in range(entries.JOB_FIELDS)})
    queue_redis.hset(keys.job_key("many"), mapping=raw)
    job = jobread.fetch("many", queue_redis)
    assert (job.kind, job.count) == ("too_large", len(raw))
    assert job.why == f"too large to read: its hash has {len(raw)} fields (at most {entries.JOB_FIELDS} here)"
    assert len(job.fields) == entries.RAW_FIELDS and all(raw[name] == value for name, value in job.fields)


def test_a_hash_under_the_read_cap_is_read_whole_and_judged_as_before(queue_redis):
    raw = good_hash(queue_redis)
    queue_redis.hset(keys.job_key("fine"), mapping=raw)
    queue_redis.hset(keys.job_key("over"), mapping={**raw, b"description": b"d" * (entries.JOB_BYTES + 1)})
    queue_redis.hset(keys.job_key("nodata"), mapping={b"origin": b"default"})
    queue_redis.set(keys.job_key("string"), "not a hash")
    fine, over, nodata, string, gone = jobread.fetch_many(["fine", "over", "nodata", "string", "gone"], queue_redis)
    assert (fine.id, fine.func_name) == ("fine", "tests.jobs.sample.add")
    over_description = dict(over.fields)[b"description"]
    assert (over.kind, over.count, over_description) == ("too_large", None, b"d" * (entries.JOB_BYTES + 1))
    assert (nodata.kind, string.kind, gone) == ("no_data", "wrong_type", None)


def test_an_id_rq_rejects_is_named_before_the_size(queue_redis):
    raw = good_hash(queue_redis)
    queue_redis.hset(keys.job_key("a:b"), mapping={**raw, b"description": b"d" * (entries.READ_BYTES + 1)})
    job = jobread.fetch("a:b", queue_redis)
    assert (job.kind, job.count, "rq accepts" in job.why) == ("id", len(raw), True)
