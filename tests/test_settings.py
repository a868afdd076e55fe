"""optima_site settings read from the environment: safe by default, clean deploy checks in prod."""

import re
import secrets
import subprocess
import sys

from tests.support import ROOT

BASE_ENV = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "optima_site.settings", "QUEUE_PREFIX": "settings-test"}
PRINT_SETTINGS = (
    "import django; django.setup(); from django.conf import settings as s; "
    "print(s.OPTIMA_ENV, s.DEBUG, s.ALLOWED_HOSTS, s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, "
    "s.SECURE_PROXY_SSL_HEADER)"
)


def run_python(env, *args):
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=dict(BASE_ENV, **env), capture_output=True, text=True, timeout=60
    )


def load_settings(env):
    return run_python(env, "-c", PRINT_SETTINGS)


def documented_prod_environment():
    """The variables docs/operations.md#deploying tells a deploy to set, placeholders filled in."""
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text.split("\n## Deploying\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    env = {}
    for line in block.splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            name, value = line.split("=", 1)
            env[name] = secrets.token_urlsafe(50) if value.startswith("<") else value
    return env


def test_unset_optima_env_is_production_and_names_every_missing_variable_with_its_fix():
    result = run_python({}, "manage.py", "check")
    assert result.returncode == 1
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(
        "django.core.exceptions.ImproperlyConfigured: SECRET_KEY environment variable is "
        "required when OPTIMA_ENV is unset, which means prod: set it to a long random string"
    )
    assert (
        "ALLOWED_HOSTS environment variable is required when OPTIMA_ENV is unset, which means prod: set it "
        "to the comma-separated host names the site is reached at, e.g. ALLOWED_HOSTS=queues.example.com."
    ) in error
    assert "For local development run `python3 dev.py run` or set OPTIMA_ENV=dev." in error


def test_unset_optima_env_without_allowed_hosts_refuses_to_start_naming_it():
    result = load_settings({"SECRET_KEY": "x" * 50})
    assert result.returncode == 1
    assert "ALLOWED_HOSTS environment variable is required when OPTIMA_ENV is unset, which means prod" in result.stderr
    assert "SECRET_KEY" not in result.stderr.strip().splitlines()[-1]


def test_unset_optima_env_runs_as_prod_debug_off_https_only():
    result = load_settings({"SECRET_KEY": "x" * 50, "ALLOWED_HOSTS": "q.example"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "prod False ['q.example'] True True None"


def test_prod_without_secret_key_refuses_to_start_naming_the_variable():
    result = load_settings({"OPTIMA_ENV": "prod", "ALLOWED_HOSTS": "q.example"})
    assert result.returncode == 1
    assert "SECRET_KEY environment variable is required when OPTIMA_ENV=prod" in result.stderr


def test_stage_is_production_like_with_hosts_and_proxy_header_from_the_environment():
    result = load_settings(
        {
            "OPTIMA_ENV": "stage",
            "SECRET_KEY": "x" * 50,
            "ALLOWED_HOSTS": "a.example, b.example",
            "SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto",
        }
    )
    assert result.returncode == 0, result.stderr
    assert (
        result.stdout.strip() == "stage False ['a.example', 'b.example'] True True ('HTTP_X_FORWARDED_PROTO', 'https')"
    )


def test_a_malformed_proxy_ssl_header_is_refused_with_an_example():
    result = load_settings(
        {
            "OPTIMA_ENV": "prod",
            "SECRET_KEY": "x" * 50,
            "ALLOWED_HOSTS": "q.example",
            "SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO=https",
        }
    )
    assert result.returncode == 1
    assert (
        "SECURE_PROXY_SSL_HEADER must be the header your HTTPS proxy sets, optionally with its value, e.g. "
        "'X-Forwarded-Proto' or 'X-Forwarded-Proto: https'; got 'HTTP_X_FORWARDED_PROTO=https'."
    ) in result.stderr


def test_dev_is_open_with_debug_on():
    result = load_settings({"OPTIMA_ENV": "dev"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith("dev True ['*']")


def test_unknown_optima_env_is_refused():
    result = load_settings({"OPTIMA_ENV": "production"})
    assert result.returncode == 1
    assert "OPTIMA_ENV must be one of dev, test, stage, prod; got 'production'" in result.stderr


def test_deploy_checks_are_clean_with_the_documented_prod_environment(tmp_path):
    env = documented_prod_environment()
    assert env["OPTIMA_ENV"] == "prod"
    # Where this machine's database and Redis are; the checks open no connection to either.
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", REDIS_URL="redis://127.0.0.1:1/0")
    result = run_python(env, "manage.py", "check", "--deploy", "--fail-level", "WARNING")
    assert (result.returncode, result.stdout.strip()) == (0, "System check identified no issues (0 silenced).")


def test_deploy_checks_name_what_a_production_deploy_without_the_https_settings_misses(tmp_path):
    env = dict(
        documented_prod_environment(),
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        SECURE_SSL_REDIRECT="0",
        SECURE_HSTS_SECONDS="0",
    )
    result = run_python(env, "manage.py", "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 1
    assert sorted(re.findall(r"\(security\.(W\d+)\)", result.stderr)) == ["W004", "W008"]


def test_prod_redirects_plain_http_except_probes_and_trusts_the_documented_proxy_header(tmp_path):
    env = dict(
        documented_prod_environment(),
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        REDIS_URL="redis://127.0.0.1:1/0",
    )
    code = (
        "import django; django.setup(); from django.test import Client; c = Client(HTTP_HOST='queues.example.com'); "
        "r = c.get('/admin/'); print(r.status_code, r['Location']); "
        "r = c.get('/admin/', HTTP_X_FORWARDED_PROTO='https'); print(r.status_code, r['Strict-Transport-Security']); "
        "print(c.get('/healthz').status_code)"
    )
    result = run_python(env, "-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "301 https://queues.example.com/admin/",
        "302 max-age=31536000; includeSubDomains; preload",
        "503",  # answered over plain HTTP (no Redis here), not redirected
    ]


def test_the_queues_app_makes_queue_prefix_rqs_key_prefix_without_any_exported_variable():
    """settings.py exports nothing: Django loading the queues app (before django_rq) sets rq's prefix, and the
    processes it starts inherit it."""
    result = run_python(
        {"OPTIMA_ENV": "test"},
        "-c",
        (
            "import os, subprocess, sys; exported = 'RQ_KEY_PREFIX' in os.environ; "
            "import django; django.setup(); import rq.defaults; from rq import Queue; "
            "print(exported, rq.defaults.RQ_KEY_PREFIX, Queue.redis_queue_namespace_prefix, "
            "subprocess.run([sys.executable, '-c', 'import rq.defaults; print(rq.defaults.RQ_KEY_PREFIX)'], "
            "capture_output=True, text=True).stdout.strip())"
        ),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "settings-test", "settings-test:queue:", "settings-test"]


def test_rq_imported_before_django_with_another_prefix_fails_with_e006_naming_the_order():
    """Reported by the system check: django.setup() itself goes through (a @task's validation at import does not
    refuse on a broken queue configuration), so `manage.py check` can list every problem."""
    result = run_python(
        {"OPTIMA_ENV": "test"},
        "-c",
        ("import rq, django; django.setup(); from django.core.management import call_command; call_command('check')"),
    )
    assert result.returncode == 1
    assert "SystemCheckError" in result.stderr, result.stderr
    assert "rq was imported with key prefix 'rq' but QUEUE_PREFIX is 'settings-test'" in result.stderr
    assert "list 'queues' before 'django_rq'" in result.stderr
    assert "queues.E006" in result.stderr
