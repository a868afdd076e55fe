"""Settings for the Optima site, read from the environment.

Thin on purpose: the queue machinery reads its own settings in ``queues/conf.py``.
Every variable is documented in docs/settings.md.
"""
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from queues.connection import RQQueuesSetting  # imports neither rq nor the app registry

BASE_DIR = Path(__file__).resolve().parent.parent

OPTIMA_ENV = os.environ.get("OPTIMA_ENV", "dev")
if OPTIMA_ENV not in ("dev", "test", "stage", "prod"):
    raise ImproperlyConfigured(
        f"OPTIMA_ENV must be one of dev, test, stage, prod; got {OPTIMA_ENV!r}. "
        "Unset it for local development."
    )
PRODUCTION_LIKE = OPTIMA_ENV in ("stage", "prod")

DEBUG = not PRODUCTION_LIKE and os.environ.get("DEBUG", "1") != "0"

if PRODUCTION_LIKE:
    SECRET_KEY = os.environ.get("SECRET_KEY", "")
    if not SECRET_KEY:
        raise ImproperlyConfigured(
            f"SECRET_KEY environment variable is required when OPTIMA_ENV={OPTIMA_ENV}: "
            "set it to a long random string (python -c 'import secrets; print(secrets.token_urlsafe(50))')."
        )
    ALLOWED_HOSTS = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "").split(",") if h.strip()]
    CSRF_TRUSTED_ORIGINS = [
        o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
    ]
else:
    SECRET_KEY = os.environ.get("SECRET_KEY", "dev-only-insecure-key-do-not-use-in-production")
    ALLOWED_HOSTS = ["*"]

# --- Queues -------------------------------------------------------------------------------
# QUEUE_PREFIX namespaces every Redis key and channel of the queue system. rq 3.0 reads its
# key prefix from the RQ_KEY_PREFIX environment variable when it is first imported, so it is
# exported here, before any app imports rq (queues.checks verifies the two agree).
QUEUE_PREFIX = os.environ.get("QUEUE_PREFIX", "optima")
os.environ["RQ_KEY_PREFIX"] = QUEUE_PREFIX

# The queues' Redis. Unset: the run command starts a private redis-server and sets it.
QUEUES_REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
# Cache, rate limiters and other shared traffic: a separate client and pool.
CACHE_REDIS_URL = os.environ.get("CACHE_REDIS_URL", QUEUES_REDIS_URL)

OPTIMA_QUEUES = {
    "default": {},
}

# django-rq (its dashboard and commands) with this app's classes: JSON jobs, retries, dead letters,
# keys under QUEUE_PREFIX. RQ_QUEUES follows the declared queues (OPTIMA_QUEUES and the feature
# apps' queues.py) on every read. queues.E009/E010 check both.
RQ = {
    "JOB_CLASS": "queues.registry.OptimaJob",
    "QUEUE_CLASS": "queues.registry.OptimaQueue",
    "SCHEDULER_CLASS": "queues.scheduler.PrefixedScheduler",
    "WORKER_CLASS": "queues.worker.OptimaWorker",
}
RQ_QUEUES = RQQueuesSetting()

# Queue panel (/admin/queues/) in stage/prod: the shared basic-auth account, on only when both are
# set (queues.W020 warns when only one is). Staff accounts with the panel permission always work.
QUEUE_BOARD_USER = os.environ.get("QUEUE_BOARD_USER", "")
QUEUE_BOARD_PASSWORD = os.environ.get("QUEUE_BOARD_PASSWORD", "")
# django-rq's own admin entry (/admin/django_rq/...) would serve its views without the panel's
# access control and audit: the panel lives at /admin/queues/ only.
RQ_SHOW_ADMIN_LINK = False

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_prometheus",
    # queues before django_rq: its rqworker/rqscheduler commands take precedence.
    "queues",
    "django_rq",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "features.orders",
    "features.repricer",
    "features.content",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

if PRODUCTION_LIKE:
    # DEBUG is off: static files (admin, panel) come from STATIC_ROOT (manage.py collectstatic).
    MIDDLEWARE.insert(MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
                      "whitenoise.middleware.WhiteNoiseMiddleware")

ROOT_URLCONF = "optima_site.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "optima_site.wsgi.application"

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "0")),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Worker processes share the test database with the test process: keep it in a file.
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / f".test-db-{QUEUE_PREFIX}.sqlite3")}
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": CACHE_REDIS_URL,
        "KEY_PREFIX": QUEUE_PREFIX,
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
    }
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Error pages mask passwords inside URL-valued settings (QUEUES_REDIS_URL, cache LOCATION).
DEFAULT_EXCEPTION_REPORTER_FILTER = "queues.connection.MaskingExceptionReporterFilter"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}

# --- Feature modules (features/; their own defaults in features/marketplace/conf.py) ------
# The marketplace API the order sync and the repricer call; the run command starts a fake one here.
MARKETPLACE_URL = os.environ.get("MARKETPLACE_URL", "http://127.0.0.1:8765")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["features.permissions.IsAuthenticatedOutsideDev"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Optima feature API",
    "DESCRIPTION": "Endpoints that enqueue feature jobs, and job status. See docs/api.md.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
}
