"""dev.py and the processes of its Procfile, run for real: signals to dev.py's own pid, the scheduler's log."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import psutil
import pytest

from tests.support import wait_for

ROOT = Path(__file__).resolve().parents[1]

# What the test session put into the environment for itself; `dev.py run` must start from a clean one.
SESSION_VARS = (
    "REDIS_URL",
    "CACHE_REDIS_URL",
    "QUEUE_PREFIX",
    "RQ_KEY_PREFIX",
    "QUEUE_JOB_MODULES",
    "OPTIMA_ENV",
    "OPTIMA_TEST_ADMIN_REDIS_URL",
    "OPTIMA_TEST_PREFIX",
    "MARKETPLACE_URL",
    "DJANGO_ALLOW_ASYNC_UNSAFE",
)
# One process per Procfile line, and the private Redis.
EXPECTED = ("redis-server", "runserver", "rqworker", "rqscheduler", "features.marketplace.fake")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def alive(proc):
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def cmdline(proc):
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_to_dev_py_run_alone_stops_every_process_gracefully(sig, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in SESSION_VARS}
    web, marketplace = free_port(), free_port()
    env.update(
        PORT=str(web),
        OPTIMA_REDIS_PORT=str(free_port()),
        MARKETPLACE_PORT=str(marketplace),
        DATABASE_URL=f"sqlite:///{tmp_path / 'dev.sqlite3'}",
        PYTHONUNBUFFERED="1",
    )
    log = open(tmp_path / "dev.log", "wb")
    # A session of its own: the signal below is the only one it gets (no terminal's process group).
    dev = subprocess.Popen(
        [sys.executable, "dev.py", "run"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    tree = psutil.Process(dev.pid)
    started = []
    try:
        output = lambda: (tmp_path / "dev.log").read_text(errors="replace")  # noqa: E731
        wait_for(
            lambda: dev.poll() is not None or answers(f"http://127.0.0.1:{web}/healthz") == 200,
            timeout=120,
            message="dev.py run to serve /healthz",
        )
        assert dev.poll() is None, output()
        wait_for(
            lambda: answers(f"http://127.0.0.1:{marketplace}/_control/requests") == 200,
            timeout=60,
            message=f"the fake marketplace on MARKETPLACE_PORT={marketplace}",
        )
        wait_for(
            lambda: all(any(name in cmdline(p) for p in tree.children(recursive=True)) for name in EXPECTED),
            timeout=60,
            message=f"every process of dev.py run: {EXPECTED}",
        )
        started = tree.children(recursive=True)

        os.kill(dev.pid, sig)  # dev.py's pid only, not its group
        assert dev.wait(40) == 128 + sig, output()
        gone, left = psutil.wait_procs(started, timeout=10)
        left = [p for p in left if alive(p)]
        assert left == [], f"left running: {[cmdline(p) for p in left]}\n{output()}"
        text = output()
        assert "SIGKILL" not in text, text  # honcho did not have to force anyone
        assert "rq.worker: Worker" in text and "SIGTERM: stopping" in text, text  # the worker's own stop
        # honcho's "stopped (rc=-15)" lines are followed by dev.py's word that this was a clean stop.
        assert f"* stopped cleanly ({sig.name}): every process ended when asked" in text, text
    finally:
        for proc in [tree, *started]:
            if alive(proc):
                proc.kill()
        dev.wait(10)
        log.close()


def test_dev_py_test_passes_its_arguments_to_pytest_and_lists_the_slowest_tests():
    result = subprocess.run(
        [
            sys.executable,
            "dev.py",
            "test",
            "-n",  # one process: the arguments reaching pytest is the point, not xdist's four (10 s of CI, not 30)
            "0",
            "-p",
            "no:cacheprovider",
            "tests/test_settings.py",
            "-k",
            "unset_optima_env_runs_as_prod",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    # -k reached pytest: one test of the file selected (pytest-xdist's processes, which dev.py starts, report
    # the selection as "[1 item]" rather than a count of deselected tests)
    assert re.search(r"\b1 passed\b", out) and re.search(r"\[1 item\]|\b1 passed, \d+ deselected\b", out), out
    assert "slowest 10 durations" in out, out  # the --durations=10 dev.py adds


def test_dev_py_test_keeps_compiled_modules_under_the_venv_even_where_the_environment_says_not_to(monkeypatch):
    """The suite's hundreds of Python processes reuse their compiled modules (dev.test_env), out of the tree."""
    monkeypatch.syspath_prepend(str(ROOT))
    import dev

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    env = dev.test_env()
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert env["PYTHONPYCACHEPREFIX"] == str(ROOT / ".venv" / "pycache")
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", "/elsewhere")  # one the caller chose is kept
    assert dev.test_env()["PYTHONPYCACHEPREFIX"] == "/elsewhere"
    assert env["PATH"] == os.environ["PATH"]  # the rest as it was


@pytest.mark.parametrize(
    ("given", "processes", "worksteal"),
    [
        ([], "4", True),
        (["-n", "2"], "2", True),  # a count given: still worksteal (under `load` one process idled most of a run)
        (["-n2"], "2", True),
        (["--numprocesses=3"], "3", True),
        (["-n", "2", "--dist", "load"], "2", False),  # a distribution given is kept
        (["-n", "0"], "0", False),  # no processes: no --dist for xdist to refuse
        (["-p", "no:xdist"], "no:xdist", False),  # xdist not loaded: --dist would be an unknown option
    ],
)
def test_dev_py_test_runs_four_processes_that_steal_work_unless_told_otherwise(
    monkeypatch, given, processes, worksteal
):
    monkeypatch.syspath_prepend(str(ROOT))
    import dev

    monkeypatch.delenv("OPTIMA_TEST_PROCESSES", raising=False)
    argv = dev.pytest_argv([*given, "tests/test_settings.py"])
    assert argv[-1] == "tests/test_settings.py" and "--durations=10" in argv
    assert dev._processes_given(argv) == processes
    assert (argv[:2] == ["--dist", "worksteal"]) is worksteal
    assert argv.count("--dist") <= 1


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_rqscheduler_logs_each_line_once(start_worker):
    proc = start_worker("--burst", command="rqscheduler")
    assert proc.wait(60) == 0, proc.output()
    lines = [line for line in proc.output().splitlines() if line.strip()]
    # rq-scheduler's own lines, whatever the format in front of them.
    for message in ("Registering birth", "RQ scheduler done, quitting", "Registering death"):
        assert sum(message in line for line in lines) == 1, proc.output()
    # And no other line twice either, timestamps aside.
    messages = Counter(re.sub(r"^[\d:,. -]+", "", line) for line in lines)
    assert [m for m, n in messages.items() if n > 1] == [], proc.output()


def clean_env(**extra):
    return {**{k: v for k, v in os.environ.items() if k not in SESSION_VARS}, **extra}


def test_dev_py_manage_refuses_when_the_dev_stacks_redis_does_not_answer_naming_dev_py_run():
    port = free_port()  # nothing listens there
    result = subprocess.run(
        [sys.executable, "dev.py", "manage", "rqstats"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(OPTIMA_REDIS_PORT=str(port)),
    )
    assert result.returncode == 1
    assert f"nothing answers on 127.0.0.1:{port}, the private Redis of `python3 dev.py run`" in result.stderr
    assert "Start `python3 dev.py run` in another terminal first, with the same OPTIMA_REDIS_PORT" in result.stderr
    assert f"(now {port})" in result.stderr


def start_redis(port, workdir):
    from devtools.redis_server import redis_server_binary

    # fmt: off
    server = subprocess.Popen(
        [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
    )
    # fmt: on
    wait_for(lambda: answers_redis(port), timeout=20, message="the redis-server to listen")
    return server


def test_dev_py_run_refuses_a_redis_port_another_checkout_holds_naming_the_port_and_optima_redis_port(tmp_path):
    import redis

    port = free_port()
    other = start_redis(port, tmp_path)  # another checkout's `dev.py run` got there first
    try:
        result = subprocess.run(
            [sys.executable, "dev.py", "run"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env=clean_env(
                OPTIMA_REDIS_PORT=str(port),
                PORT=str(free_port()),
                MARKETPLACE_PORT=str(free_port()),
                DATABASE_URL=f"sqlite:///{tmp_path / 'dev.sqlite3'}",
            ),
        )
        written = redis.Redis(port=port).dbsize()
    finally:
        other.terminate()
        other.wait(10)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"dev.py run: 127.0.0.1:{port} is taken" in result.stderr
    assert f"Set OPTIMA_REDIS_PORT to a free port, e.g. OPTIMA_REDIS_PORT={port + 1} python3 dev.py run" in (
        result.stderr
    )
    assert written == 0  # nothing of this checkout's in the other one's Redis
    assert "Optima is starting" not in result.stdout


def test_a_run_knows_the_redis_it_started_from_the_one_another_process_started(tmp_path):
    from devtools.redis_server import started_here

    port = free_port()
    server = start_redis(port, tmp_path)
    try:
        assert started_here(port, server.pid) is True
        assert started_here(port, server.pid + 1) is False  # the port answers, but it is not ours
    finally:
        server.terminate()
        server.wait(10)
    assert started_here(port, server.pid) is False  # nothing answers


def test_dev_py_manage_runs_manage_py_against_the_dev_stacks_redis_and_prefix(tmp_path):
    from devtools.redis_server import redis_server_binary

    port = free_port()
    server = subprocess.Popen(
        [
            redis_server_binary(),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: answers_redis(port), timeout=20, message="the redis-server to listen")
        import redis

        redis.Redis(port=port).rpush("optima:queue:default", "a", "b", "c")  # what `dev.py run` would hold
        result = subprocess.run(
            [sys.executable, "dev.py", "manage", "rqstats", "--json"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env=clean_env(OPTIMA_REDIS_PORT=str(port)),
        )
    finally:
        server.terminate()
        server.wait(10)
    assert result.returncode == 0, result.stdout + result.stderr
    queues = {q["name"]: q for q in json.loads(result.stdout)["queues"]}
    assert queues["default"]["jobs"] == 3


def answers_redis(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False
