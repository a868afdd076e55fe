"""optima_site settings read from the environment."""
import subprocess
import sys

from tests.conftest import ROOT


def load_settings(env):
    code = "import django; django.setup(); from django.conf import settings; print(settings.DEBUG, settings.ALLOWED_HOSTS)"
    base = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "optima_site.settings", "QUEUE_PREFIX": "settings-test"}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(base, **env), capture_output=True,
                          text=True, timeout=60)


def test_prod_without_secret_key_refuses_to_start_naming_the_variable():
    result = load_settings({"OPTIMA_ENV": "prod"})
    assert result.returncode == 1
    assert "SECRET_KEY environment variable is required when OPTIMA_ENV=prod" in result.stderr


def test_stage_is_production_like_with_hosts_from_the_environment():
    result = load_settings({"OPTIMA_ENV": "stage", "SECRET_KEY": "x" * 50, "ALLOWED_HOSTS": "a.example, b.example"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False ['a.example', 'b.example']"


def test_dev_is_the_default_with_debug_on():
    result = load_settings({})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True ['*']"


def test_unknown_optima_env_is_refused():
    result = load_settings({"OPTIMA_ENV": "production"})
    assert result.returncode == 1
    assert "OPTIMA_ENV must be one of dev, test, stage, prod; got 'production'" in result.stderr
