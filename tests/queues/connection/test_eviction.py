"""Eviction and memory of the queues' Redis (queues/connection/info.py): the maxmemory-policy read from
INFO is a system check (queues.E070 / W071) and a /healthz failure, and the scrape reports used
memory, maxmemory and evicted keys. Each test runs its own redis-server with the policy under test."""

import shutil

import pytest
import redis
from django.core.checks import Error, Warning, run_checks

import queues
from devtools.redis_server import RedisServer
from queues.exceptions import QueueUnavailable
from queues.metrics import collector
from tests.support import closed_port
from tests.support.metrics import samples, scrape

TOKEN = "probe-token-" + "y" * 32
AS_PROBE = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}
FIX = (
    "Set maxmemory-policy noeviction on the queues' Redis (redis.conf, CONFIG SET, or the managed service's "
    "parameter group) and give the cache its own Redis (CACHE_REDIS_URL) if it should evict; see "
    "docs/operations.md#redis-memory-and-eviction."
)


class PolicyRedisServer(RedisServer):
    """A private redis-server started with ``--maxmemory-policy <policy>`` (and ``--maxmemory``)."""

    def __init__(self, policy, maxmemory=0):
        super().__init__()
        self.policy, self.maxmemory = policy, maxmemory

    def start(self, timeout=10):
        super().start(timeout)
        admin = redis.Redis(port=self.port)
        # redis-server reads these at start as it reads redis.conf; CONFIG SET is the same setting.
        admin.config_set("maxmemory-policy", self.policy)
        admin.config_set("maxmemory", self.maxmemory)
        admin.close()
        return self


@pytest.fixture
def policy_redis(settings):
    """make(policy, maxmemory=0) -> a private Redis with that policy, made the queues' Redis."""
    servers = []

    def make(policy, maxmemory=0):
        server = PolicyRedisServer(policy, maxmemory).start()
        servers.append(server)
        settings.QUEUES_REDIS_URL = server.url
        return server

    yield make
    for server in servers:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


@pytest.fixture(autouse=True)
def _fresh_scrapes(settings):
    settings.OPTIMA_QUEUES_OPTIONS = {"METRICS_CACHE_SECONDS": 0}
    settings.HEALTHZ_TOKEN = TOKEN
    collector.cache.clear()
    yield
    collector.cache.clear()


def eviction_checks():
    return [e for e in run_checks() if e.id in ("queues.E070", "queues.W071")]


# --- the system check -------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["allkeys-lru", "allkeys-lfu", "allkeys-random"])
def test_an_allkeys_policy_is_error_e070(policy, policy_redis):
    server = policy_redis(policy)
    assert eviction_checks() == [
        Error(
            f"The queues' Redis (redis://127.0.0.1:{server.port}/0) has maxmemory-policy {policy}: when it reaches "
            "maxmemory it deletes any key, waiting jobs, queue lists and registries included, and those jobs are lost "
            "without an error.",
            hint=FIX,
            id="queues.E070",
        )
    ]


@pytest.mark.parametrize("policy", ["volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"])
def test_a_volatile_policy_is_warning_w071_naming_what_it_may_evict(policy, policy_redis):
    server = policy_redis(policy)
    assert eviction_checks() == [
        Warning(
            f"The queues' Redis (redis://127.0.0.1:{server.port}/0) has maxmemory-policy {policy}: when it reaches "
            "maxmemory it deletes keys that carry a TTL: worker liveness keys and registrations (a live worker looks "
            "dead and its job runs again), scheduler locks, finished and failed jobs kept for result_ttl / "
            "failure_ttl, and unique-enqueue keys (a duplicate can be enqueued).",
            hint=FIX,
            id="queues.W071",
        )
    ]


def test_noeviction_passes_the_check(policy_redis):
    policy_redis("noeviction", maxmemory=50 * 1024 * 1024)
    assert eviction_checks() == []


def test_the_policy_is_read_without_config_get_which_managed_redis_refuses(policy_redis, settings):
    server = policy_redis("allkeys-lru")
    admin = redis.Redis(port=server.port)
    admin.acl_setuser("app", enabled=True, passwords=["+app-s3cr3t-pw"], keys=["*"], commands=["+@all", "-config"])
    settings.QUEUES_REDIS_URL = f"redis://app:app-s3cr3t-pw@127.0.0.1:{server.port}/0"
    with pytest.raises(redis.exceptions.NoPermissionError):
        redis.Redis.from_url(settings.QUEUES_REDIS_URL).config_get("maxmemory-policy")
    [error] = eviction_checks()
    assert error.id == "queues.E070"
    assert f"(redis://app:***@127.0.0.1:{server.port}/0)" in error.msg and "app-s3cr3t-pw" not in error.msg


def test_an_unreachable_redis_makes_the_check_say_nothing(settings):
    settings.QUEUES_REDIS_URL = f"redis://:pw@127.0.0.1:{closed_port()}/0"
    assert eviction_checks() == []


def test_a_redis_that_refuses_info_makes_the_check_say_nothing(policy_redis, settings):
    server = policy_redis("allkeys-lru")
    redis.Redis(port=server.port).acl_setuser(
        "noinfo", enabled=True, passwords=["+pw-noinfo"], keys=["*"], commands=["+@all", "-info"]
    )
    settings.QUEUES_REDIS_URL = f"redis://noinfo:pw-noinfo@127.0.0.1:{server.port}/0"
    assert eviction_checks() == []


# --- /healthz ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_healthz_fails_the_queue_redis_under_an_allkeys_policy(policy_redis, client):
    server = policy_redis("allkeys-lru")
    anonymous = client.get("/healthz")
    assert anonymous.status_code == 503
    assert anonymous.json() == {
        "status": "error",
        "failing": ["queue_redis"],
        "components": {
            "database": {"status": "ok"},
            "queue_redis": {"status": "error"},
            "cache_redis": {"status": "ok"},
        },
    }
    probe = client.get("/healthz", **AS_PROBE).json()
    assert probe["components"]["queue_redis"] == {
        "status": "error",
        "url": f"redis://127.0.0.1:{server.port}/0",
        "error": "EvictionPolicy",
        "maxmemory_policy": "allkeys-lru",
    }


@pytest.mark.django_db
@pytest.mark.parametrize("policy", ["noeviction", "volatile-lru"])
def test_healthz_is_200_under_noeviction_and_volatile_policies(policy, policy_redis, client):
    policy_redis(policy)
    response = client.get("/healthz", **AS_PROBE)
    assert response.status_code == 200, response.json()
    assert response.json()["components"]["queue_redis"] == {
        "status": "ok",
        "url": response.json()["components"]["queue_redis"]["url"],
    }


@pytest.mark.django_db
def test_a_cache_redis_of_its_own_may_evict_without_failing_healthz(policy_redis, settings, client):
    policy_redis("noeviction")
    cache = PolicyRedisServer("allkeys-lru").start()
    try:
        settings.CACHE_REDIS_URL = cache.url
        response = client.get("/healthz", **AS_PROBE)
    finally:
        cache.stop()
        shutil.rmtree(cache.workdir, ignore_errors=True)
    assert response.status_code == 200, response.json()
    assert response.json()["failing"] == []


# --- metrics ----------------------------------------------------------------------------------


def memory_samples(found):
    return {name: v for (name, labels), v in found.items() if name.startswith("optima_redis_")}


@pytest.mark.django_db
def test_the_scrape_reports_used_memory_maxmemory_and_evicted_keys(policy_redis, client):
    server = policy_redis("noeviction", maxmemory=64 * 1024 * 1024)
    info = redis.Redis(port=server.port).info("memory")
    found = memory_samples(samples(scrape(client)))
    assert set(found) == {
        "optima_redis_memory_used_bytes",
        "optima_redis_memory_max_bytes",
        "optima_redis_evicted_keys_total",
    }
    assert found["optima_redis_memory_max_bytes"] == 64 * 1024 * 1024
    assert found["optima_redis_evicted_keys_total"] == 0
    # used_memory moves with every command; the scrape's own read is within 1 MiB of ours.
    assert abs(found["optima_redis_memory_used_bytes"] - info["used_memory"]) < 1024 * 1024
    assert found["optima_redis_memory_used_bytes"] > 0


@pytest.mark.django_db
def test_maxmemory_zero_means_no_limit(policy_redis, client):
    policy_redis("noeviction", maxmemory=0)
    assert memory_samples(samples(scrape(client)))["optima_redis_memory_max_bytes"] == 0


@pytest.mark.django_db
def test_evicted_keys_count_the_keys_a_full_allkeys_redis_deleted(policy_redis, client):
    server = policy_redis("allkeys-random")
    admin = redis.Redis(port=server.port)
    admin.config_set("maxmemory", admin.info("memory")["used_memory"] + 2 * 1024 * 1024)
    for i in range(100):
        admin.set(f"filler:{i}", b"x" * 64 * 1024)  # 6.4 MB into a Redis with 2 MB to spare
    admin.config_set("maxmemory", 0)  # stop evicting: the scrape's own connection must not evict more
    evicted = admin.info("stats")["evicted_keys"]
    assert evicted > 0
    assert admin.dbsize() == 100 - evicted
    found = memory_samples(samples(scrape(client)))
    assert found["optima_redis_evicted_keys_total"] == evicted


@pytest.mark.django_db
def test_a_redis_that_refuses_info_leaves_the_memory_families_out_and_the_queues_in(
    policy_redis, settings, client, caplog
):
    server = policy_redis("noeviction")
    redis.Redis(port=server.port).acl_setuser(
        "noinfo", enabled=True, passwords=["+pw-noinfo"], keys=["*"], commands=["+@all", "-info"]
    )
    settings.QUEUES_REDIS_URL = f"redis://noinfo:pw-noinfo@127.0.0.1:{server.port}/0"
    found = samples(scrape(client))
    assert memory_samples(found) == {}
    assert found[("optima_queue_scrape_error", frozenset({"queue": "default", "source": "redis"}.items()))] == 0
    assert any(
        r.getMessage().startswith("reading the Redis memory (INFO) failed (NoPermissionError")
        for r in caplog.records
        if r.name == "queues.metrics"
    )


@pytest.mark.django_db
def test_an_unreachable_redis_leaves_the_memory_families_out(settings, client):
    settings.QUEUES_REDIS_URL = f"redis://127.0.0.1:{closed_port()}/0"
    assert memory_samples(samples(scrape(client))) == {}


@pytest.mark.django_db(transaction=True)
def test_a_full_noeviction_redis_refuses_the_enqueue_loudly_instead_of_losing_a_job(policy_redis):
    server = policy_redis("noeviction")
    admin = redis.Redis(port=server.port)
    admin.config_set("maxmemory", admin.info("memory")["used_memory"] + 1024 * 1024)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        for i in range(100):
            admin.set(f"filler:{i}", b"x" * 64 * 1024)
    with pytest.raises(QueueUnavailable):
        queues.enqueue("default", "tests.jobs.sample.add", 1, 2)
    assert admin.info("stats")["evicted_keys"] == 0


def test_a_worker_refuses_to_start_on_a_redis_that_evicts_any_key(policy_redis, start_worker):
    """rqworker runs the checks tagged ``redis`` (``WORKER_CHECK_TAGS``): an error stops it before it takes a job."""
    server = policy_redis("allkeys-lru")
    worker = start_worker("default", "--burst", env={"REDIS_URL": server.url})
    assert worker.wait(60) != 0
    assert "queues.E070" in worker.output() and "noeviction" in worker.output()
