"""Settings for the Optima site, read from the environment.

Thin on purpose: the queue machinery reads its own settings in ``queues/conf.py``.
Every variable is documented in docs/settings.md; what a deploy must set, in
docs/operations.md#deploying.

Safe by default: with ``OPTIMA_ENV`` unset the site runs as ``prod`` (DEBUG off, panel and API
closed, HTTPS only, ``SECRET_KEY`` and ``ALLOWED_HOSTS`` required). ``python3 dev.py run`` sets
``OPTIMA_ENV=dev`` for its processes and the test suite sets ``test``.
"""

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from queues.connection import RQQueuesSetting  # imports neither rq nor the app registry

BASE_DIR = Path(__file__).resolve().parent.parent

OPTIMA_ENV = os.environ.get("OPTIMA_ENV") or "prod"
if OPTIMA_ENV not in ("dev", "test", "stage", "prod"):
    raise ImproperlyConfigured(
        f"OPTIMA_ENV must be one of dev, test, stage, prod; got {OPTIMA_ENV!r}. "
        "Use OPTIMA_ENV=dev for local development (python3 dev.py run sets it); unset means prod."
    )
PRODUCTION_LIKE = OPTIMA_ENV in ("stage", "prod")


def _env_list(name):
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def _env_flag(name, default):
    """A 0/1 environment switch; anything else is refused, naming the variable."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    if value not in ("0", "1"):
        raise ImproperlyConfigured(f"{name} must be 0 or 1, got {value!r}.")
    return value == "1"


def _env_int(name, default):
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number of seconds, got {value!r}.") from None


def _proxy_ssl_header(value):
    """``SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto"`` (or ``"X-Forwarded-Proto: https"``) as Django wants it:
    ``("HTTP_X_FORWARDED_PROTO", "https")``. Unset: None (Django trusts no header)."""
    if not value.strip():
        return None
    name, _, expected = value.partition(":")
    name, expected = name.strip(), expected.strip() or "https"
    if not name or not all(c.isalnum() or c == "-" for c in name):
        raise ImproperlyConfigured(
            f"SECURE_PROXY_SSL_HEADER must be the header your HTTPS proxy sets, optionally with its value, "
            f"e.g. 'X-Forwarded-Proto' or 'X-Forwarded-Proto: https'; got {value!r}."
        )
    return "HTTP_" + name.upper().replace("-", "_"), expected


DEBUG = not PRODUCTION_LIKE and os.environ.get("DEBUG", "1") != "0"

if PRODUCTION_LIKE:
    _why = f"OPTIMA_ENV={OPTIMA_ENV}" if os.environ.get("OPTIMA_ENV") else "OPTIMA_ENV is unset, which means prod"
    _missing = []
    SECRET_KEY = os.environ.get("SECRET_KEY", "")
    if not SECRET_KEY:
        _missing.append(
            f"SECRET_KEY environment variable is required when {_why}: "
            "set it to a long random string (python -c 'import secrets; print(secrets.token_urlsafe(50))')."
        )
    ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS")
    if not ALLOWED_HOSTS:
        _missing.append(
            f"ALLOWED_HOSTS environment variable is required when {_why}: set it to the comma-separated "
            "host names the site is reached at, e.g. ALLOWED_HOSTS=queues.example.com."
        )
    if _missing:
        raise ImproperlyConfigured(
            " ".join(_missing) + " For local development run `python3 dev.py run` or set OPTIMA_ENV=dev. "
            "What a deploy must set: docs/operations.md#deploying."
        )
    CSRF_TRUSTED_ORIGINS = _env_list("CSRF_TRUSTED_ORIGINS")

    # HTTPS only (manage.py check --deploy is clean with these). Behind a proxy that ends TLS, set
    # SECURE_PROXY_SSL_HEADER to the header it sets (and strips from clients), or every request redirects.
    SECURE_PROXY_SSL_HEADER = _proxy_ssl_header(os.environ.get("SECURE_PROXY_SSL_HEADER", ""))
    SECURE_SSL_REDIRECT = _env_flag("SECURE_SSL_REDIRECT", True)
    # Probes and Prometheus often reach the processes over plain HTTP inside the network.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
    SECURE_HSTS_SECONDS = _env_int("SECURE_HSTS_SECONDS", 31536000)  # one year
    SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_flag("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = _env_flag("SECURE_HSTS_PRELOAD", True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
else:
    SECRET_KEY = os.environ.get("SECRET_KEY", "dev-only-insecure-key-do-not-use-in-production")
    ALLOWED_HOSTS = ["*"]

# /healthz details (Redis URLs masked, database vendor, errors, timing) for staff users and for a probe
# sending "Authorization: Bearer <HEALTHZ_TOKEN>"; anonymous callers get each component's status only.
HEALTHZ_TOKEN = os.environ.get("HEALTHZ_TOKEN", "")

# --- Queues -------------------------------------------------------------------------------
# QUEUE_PREFIX namespaces every Redis key and channel of the queue system. The queues app makes it
# rq's key prefix when Django loads it (queues/apps.py): nothing here may import rq, and 'queues' comes
# before 'django_rq' in INSTALLED_APPS (queues.E006 says when rq was imported with another prefix).
QUEUE_PREFIX = os.environ.get("QUEUE_PREFIX", "optima")

# The queues' Redis. Unset: the run command starts a private redis-server and sets it.
QUEUES_REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
# More Redis servers for the queues (issue 36): a JSON object of name -> URL; a queue's "redis" option names
# one (docs/settings.md#several-redis-servers). Kept as given: queues/connection/servers.py parses and checks it.
QUEUES_REDIS_SERVERS = os.environ.get("REDIS_SERVERS", "")
# Cache, rate limiters and other shared traffic: a separate client and pool.
CACHE_REDIS_URL = os.environ.get("CACHE_REDIS_URL", QUEUES_REDIS_URL)
# Failover (docs/settings.md#redis-failover): with sentinels the clients find the master through them
# (REDIS_URL's user, password, db and TLS still apply). Kept as given: queues/connection/failover.py parses and
# checks them (queues.E040-E043). The cache follows the queues' sentinels unless it has its own URL.
QUEUES_REDIS_SENTINELS = os.environ.get("REDIS_SENTINELS", "")
QUEUES_REDIS_SENTINEL_MASTER = os.environ.get("REDIS_SENTINEL_MASTER", "")
_cache_follows_queues = "CACHE_REDIS_URL" not in os.environ
CACHE_REDIS_SENTINELS = os.environ.get("CACHE_REDIS_SENTINELS", QUEUES_REDIS_SENTINELS if _cache_follows_queues else "")
CACHE_REDIS_SENTINEL_MASTER = os.environ.get(
    "CACHE_REDIS_SENTINEL_MASTER", QUEUES_REDIS_SENTINEL_MASTER if _cache_follows_queues else ""
)
# Every enqueue waits (WAIT) for this many replicas, at most this many milliseconds; 0: no wait.
QUEUES_REDIS_WAIT_REPLICAS = os.environ.get("REDIS_WAIT_REPLICAS", "0")
QUEUES_REDIS_WAIT_TIMEOUT_MS = os.environ.get("REDIS_WAIT_TIMEOUT_MS", "1000")

OPTIMA_QUEUES = {
    "default": {},
}

# Job modules besides each installed app's ``jobs`` module (queues/catalog/jobs.py): only functions
# decorated with @queues.job in these run. Comma-separated in the environment.
QUEUE_JOB_MODULES = [m.strip() for m in os.environ.get("QUEUE_JOB_MODULES", "").split(",") if m.strip()]
# Signed jobs (queues/jobs/signing.py): the HMAC key (default: derived from SECRET_KEY), keys that still
# verify during a rotation (comma-separated), and until when (ISO 8601, UTC) unsigned jobs still run.
QUEUE_SIGNING_KEY = os.environ.get("QUEUE_SIGNING_KEY", "")
QUEUE_SIGNING_OLD_KEYS = [k for k in os.environ.get("QUEUE_SIGNING_OLD_KEYS", "").split(",") if k.strip()]
QUEUE_ACCEPT_UNSIGNED_UNTIL = os.environ.get("QUEUE_ACCEPT_UNSIGNED_UNTIL", "")
# 0 once no worker of a release up to 6f24d7d runs on the same Redis and prefix: workers write no rq execution
# hash and worker's set, six Redis commands a job fewer (queues/jobs/execution.py, docs/settings.md).
OPTIMA_QUEUES_OPTIONS = {"RQ_EXECUTION_RECORDS": _env_flag("QUEUE_RQ_EXECUTION_RECORDS", False)}

# Django's Tasks API runs on the queues (docs/tasks.md): @task functions in job modules, any declared queue.
TASKS = {"default": {"BACKEND": "queues.tasks.QueuesBackend"}}

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
# Reverse proxies whose X-Forwarded-For is believed for the sign-in throttle (queues/board/throttle.py).
QUEUE_TRUSTED_PROXIES = [p.strip() for p in os.environ.get("QUEUE_TRUSTED_PROXIES", "").split(",") if p.strip()]
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
    # Django's Tasks API (the django-tasks backport on Django 5.2): its system checks and TASKS settings.
    "django_tasks",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's and Redoc's assets for /api/docs/ and /api/redoc/, no CDN
    "features.orders",
    "features.repricer",
    "features.content",
    "features.sellers",
    "features.reports",
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
    "optima_site.middleware.DatabaseUnavailableMiddleware",  # templates/503.html
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

if PRODUCTION_LIKE:
    # DEBUG is off: static files (admin, panel) come from STATIC_ROOT (manage.py collectstatic).
    MIDDLEWARE.insert(
        MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
        "whitenoise.middleware.WhiteNoiseMiddleware",
    )

ROOT_URLCONF = "optima_site.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # The site's own (the admin's title and header, the 404, 500 and 503 pages); the queues app carries
        # its own templates (queues/templates/).
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
    # Web processes, workers and the relay write one file at once (docs/settings.md#sqlite): WAL lets
    # readers go on while one writes; IMMEDIATE takes the write lock when a transaction begins, so a
    # transaction waits up to `timeout` seconds for it instead of failing at once ("database is locked")
    # when a deferred one would have to upgrade its read lock; synchronous=NORMAL is WAL's safe default.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": _env_int("SQLITE_BUSY_TIMEOUT", 20),
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": CACHE_REDIS_URL,
        "KEY_PREFIX": QUEUE_PREFIX,
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
    }
}
if CACHE_REDIS_SENTINELS:  # the master of CACHE_REDIS_SENTINEL_MASTER, found through the sentinels
    CACHES["default"]["OPTIONS"]["pool_class"] = "queues.sentinel.CacheSentinelPool"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Error pages mask passwords inside URL-valued settings (QUEUES_REDIS_URL, cache LOCATION), locals, GET and POST
# values (the filter), and the exception's message and the request's URL (the reporter).
DEFAULT_EXCEPTION_REPORTER_FILTER = "queues.connection.MaskingExceptionReporterFilter"
DEFAULT_EXCEPTION_REPORTER = "queues.connection.MaskingExceptionReporter"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# "plain" (a terminal) or "json" (one object a line, for log shippers: queues/logs/formats.py); another
# value is system check queues.E120 and logs plain meanwhile.
QUEUES_LOG_FORMAT = os.environ.get("OPTIMA_LOG_FORMAT", "plain")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": "queues.logs.formats.JsonFormatter"},
    },
    # Control characters in what a request puts into a log line are escaped, so a request cannot
    # forge a line: the queues app's own loggers do it themselves (queues/logsafe.py), the worker
    # processes escape every queues.* and rq.* record (logsafe.install); these are Django's request
    # loggers.
    "filters": {"escape": {"()": "queues.logsafe.EscapeControlCharacters"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "json" if QUEUES_LOG_FORMAT == "json" else "plain"}
    },
    "loggers": {
        **{name: {"filters": ["escape"]} for name in ("django.request", "django.security")},
        # runserver's request lines: Django's own handler for them is replaced here (a logger configured
        # without handlers loses them, and Django's does not propagate), so they take the console's format.
        "django.server": {"handlers": ["console"], "filters": ["escape"], "propagate": False},
        # One line per HTTP call a job makes is the called server's to log (the fake marketplace does).
        "httpx": {"level": "WARNING"},
    },
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
    # The API docs pages load Swagger UI / Redoc from drf-spectacular-sidecar's static files (offline too).
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # The system's fonts, not Google's (templates/drf_spectacular/redoc.html loads nothing from another host).
    "REDOC_UI_SETTINGS": {
        "theme": {
            "typography": {
                "fontFamily": 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif',
                "headings": {"fontFamily": 'system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif'},
                "code": {"fontFamily": 'ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace'},
            }
        }
    },
}
