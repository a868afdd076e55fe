"""docs/install.md, proven in a fresh project (issue 20): the wheel of pyproject.toml, installed into a directory of
its own, in a project made by ``django-admin startproject``, configured by the doc's code blocks as written.

The blocks are taken from the doc by their ``<!-- install: ... -->`` markers, never retyped here, so the test fails
when the doc and the code part ways. Every process runs with cwd in the temporary directory and a PYTHONPATH of
the installed package and the new project only: the checkout is not importable there (the report says where
``queues`` came from). Dependencies come from the suite's virtualenv.

The new project uses the session's Redis user and prefix (tests/session_env.py: the ACL user may touch
``<prefix>:*`` only, and QUEUE_PREFIX allows no ':' for a sub-prefix); the autouse clean-up flushes the prefix
after it. It has its own SQLite database, so CI's PostgreSQL pass skips it (marker ``install``).
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile

import pytest

from tests.support import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.install]

DOC = ROOT / "docs" / "install.md"
DRIVER = ROOT / "tests" / "install" / "drive.py"
BLOCK = re.compile(r"<!-- install: (?P<marker>[^>]+?) -->\n```[a-z]*\n(?P<code>.*?)```", re.S)

SHIPPING_FAILING_JOB = '''

@queues.job
def always_fails(order_id):
    """The test's own job that never succeeds: it must end as a dead letter."""
    raise RuntimeError(f"no carrier for order {order_id}")
'''


def doc_blocks():
    """{marker: code} of docs/install.md's marked blocks."""
    blocks = {m["marker"]: m["code"] for m in BLOCK.finditer(DOC.read_text())}
    expected = {
        "pip",
        "append settings.py",
        "append urls.py",
        "commands",
        "commands app",
        "append settings.py app",
        "append settings.py static",
        "commands static",
        "shipping/jobs.py",
        "enqueue",
        "processes",
        "append settings.py tasks",
        "append shipping/jobs.py task",
        "enqueue task",
    }
    assert set(blocks) == expected, "docs/install.md's install markers changed: update tests/test_install.py"
    return blocks


def commands(block):
    """The shell block's command lines, each as an argv (comments and blank lines dropped)."""
    return [shlex.split(line, comments=True) for line in block.splitlines() if shlex.split(line, comments=True)]


def the_command(block, name):
    """The one ``python manage.py <name> ...`` line of a shell block, ``python`` as this interpreter."""
    [argv] = [argv for argv in commands(block) if argv[:3] == ["python", "manage.py", name]]
    return argv


def build_wheel(tmp_path):
    """The wheel of a copy of pyproject.toml and queues/: a build inside the checkout would write build/ into a
    tree other processes share, and its stale build/lib would put files deleted from queues/ into the wheel."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(ROOT / "pyproject.toml", src)
    shutil.copytree(ROOT / "queues", src / "queues", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            str(src),
            "-w",
            str(tmp_path / "dist"),
        ],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=120,
    )
    [wheel] = (tmp_path / "dist").glob("*.whl")
    return wheel, {str(p.relative_to(src)) for p in (src / "queues").rglob("*") if p.is_file()}


def test_the_install_guide_as_written_runs_jobs_panel_and_metrics_in_a_fresh_project(tmp_path):
    blocks = doc_blocks()
    wheel, package_files = build_wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {n for n in names if ".dist-info/" not in n} == package_files  # the app whole, and nothing else
    assert any(n.startswith("queues/templates/") for n in names) and "queues/migrations/0001_initial.py" in names
    assert "queues/py.typed" in names  # PEP 561: type checkers read the package's own hints
    [pip_line] = commands(blocks["pip"])
    assert pip_line == ["pip", "install", wheel.name.split("-")[0].replace("_", "-")]  # the doc's name is the wheel's

    site, project = tmp_path / "site", tmp_path / "shop"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=120,
    )
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "PYTHONPATH": f"{site}{os.pathsep}{project}",
        "REDIS_URL": os.environ["REDIS_URL"],
        "QUEUE_PREFIX": os.environ["QUEUE_PREFIX"],
        "DJANGO_SUPERUSER_PASSWORD": "install-test-password",
    }

    def run(*argv, cwd=project, timeout=60):
        argv = [sys.executable if word == "python" else word for word in argv]
        result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        assert result.returncode == 0, f"{shlex.join(argv)} exited {result.returncode}:\n{result.stderr}"
        return result

    run("python", "-m", "django", "startproject", "shop", cwd=tmp_path)  # django-admin startproject shop
    # Only what the doc says, in its order: the settings block, the app the job lives in, the Tasks backend.
    with open(project / "shop" / "settings.py", "a") as settings:
        settings.write("\n" + blocks["append settings.py"])
    run(*the_command(blocks["commands app"], "startapp"))
    with open(project / "shop" / "settings.py", "a") as settings:
        settings.write("\n" + blocks["append settings.py app"])
        settings.write("\n" + blocks["append settings.py tasks"])
        settings.write("\n" + blocks["append settings.py static"])
    with open(project / "shop" / "urls.py", "a") as urls:
        urls.write("\n" + blocks["append urls.py"])
    (project / "shipping" / "jobs.py").write_text(
        blocks["shipping/jobs.py"] + SHIPPING_FAILING_JOB + "\n" + blocks["append shipping/jobs.py task"]
    )

    assert run("python", "manage.py", "check").stdout == "System check identified no issues (0 silenced).\n"
    run(*the_command(blocks["commands"], "migrate"))
    run(*the_command(blocks["commands static"], "collectstatic"))
    assert (project / "staticfiles" / "staticfiles.json").is_file()  # the manifest storage wrote its manifest
    run(
        *the_command(blocks["commands"], "createsuperuser"),
        "--noinput",
        "--username",
        "admin",
        "--email",
        "admin@shop.example",
    )

    enqueue = tmp_path / "enqueue_block.py"
    enqueue.write_text(blocks["enqueue"])
    enqueue_task = tmp_path / "enqueue_task_block.py"
    enqueue_task.write_text(blocks["enqueue task"])
    shutil.copy(DRIVER, tmp_path / "drive.py")
    worker = the_command(blocks["processes"], "rqworker")
    worker_log = tmp_path / "worker.log"
    env["DJANGO_SETTINGS_MODULE"] = "shop.settings"
    result = run(
        "python",
        str(tmp_path / "drive.py"),
        str(enqueue),
        json.dumps(worker),
        str(worker_log),
        "admin",
        str(project),
        str(enqueue_task),
        cwd=tmp_path,
        timeout=120,
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    log = worker_log.read_text(errors="replace")

    assert report["queues_file"].startswith(str(site) + os.sep)
    assert report["rq_key_prefix"] == os.environ["QUEUE_PREFIX"]
    assert report["good_state"] == "finished", log
    assert report["gone_state"] == "gone"  # the doc's state lines, for a job no longer in Redis
    assert report["good_result"] == {"order": 42, "carrier": "dhl", "label": "DHL-00000042"}
    assert report["dead_letters"] == [report["bad"]], log
    assert (report["task_status"], report["task_return_value"]) == ("SUCCESSFUL", "order 42 is on its way"), log
    assert report["task_enqueued_status"] == "READY"
    assert report["worker_exit"] == 0, log
    assert {url: status for url, status in report["pages"].items() if status != 200} == {}
    assert len(report["pages"]) >= 16  # 12 panel pages, the queues admin changelists, the dead letter's page
    assert report["deadletter_changelist_names_bad_job"] is True
    assert report["metrics_status"] == 200
    expected_metrics = {
        'optima_queue_jobs{queue="shipping",state="completed"} 2.0',  # the job and the task
        'optima_queue_dead_letter{queue="shipping"} 1.0',
        'optima_queue_jobs_dead_total{queue="shipping"} 1.0',
    }
    assert expected_metrics <= set(report["metrics_lines"]), report["metrics_lines"]
    assert report["healthz_status"] == 200
