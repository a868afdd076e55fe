"""A database that stays locked past its timeout answers 503, never 500, and leaves nothing half-written.

Another connection holds the lock for real: on SQLite a ``BEGIN IMMEDIATE`` on the test database's file
(this process's connection waits its busy timeout, shortened here, then fails "database is locked"); on
PostgreSQL an ``ACCESS EXCLUSIVE`` lock on the content table (this connection's ``lock_timeout`` runs out).
"""

import contextlib
import sqlite3

import pytest
from django.db import connection

from features.content.models import ContentGeneration
from queues.models import OutboxEntry

pytestmark = pytest.mark.django_db(transaction=True)


@contextlib.contextmanager
def database_locked(*tables):
    """The database locked by another connection (PostgreSQL: ``tables``); this process's waits are cut
    to ~0.3 s."""
    if connection.vendor == "sqlite":
        connection.close()
        options = connection.settings_dict["OPTIONS"]
        saved = options.get("timeout")
        options["timeout"] = 0.3
        holder = sqlite3.connect(connection.settings_dict["NAME"], timeout=5, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            holder.execute("ROLLBACK")
            holder.close()
            connection.close()
            options["timeout"] = saved
    else:
        import psycopg

        settings = connection.settings_dict
        holder = psycopg.connect(
            host=settings["HOST"],
            port=settings["PORT"] or 5432,
            user=settings["USER"],
            password=settings["PASSWORD"] or None,
            dbname=settings["NAME"],
        )
        holder.execute(f"LOCK TABLE {', '.join(tables)} IN ACCESS EXCLUSIVE MODE")
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '300ms'")
        try:
            yield
        finally:
            holder.rollback()
            holder.close()
            with connection.cursor() as cursor:
                cursor.execute("SET lock_timeout = 0")


def test_an_enqueue_into_a_locked_database_answers_503_with_retry_after_and_writes_nothing(api, caplog):
    client = api.own(products=[501])
    with database_locked(ContentGeneration._meta.db_table):
        response = client.post("/features/content/", {"product_id": 501, "prompt": "a text"}, format="json")
    assert (response.status_code, response["Retry-After"]) == (503, "5")
    assert response.json() == {
        "detail": "The database is busy or unavailable right now, so nothing was done. Try again in a few seconds."
    }
    assert (ContentGeneration.objects.count(), OutboxEntry.objects.count()) == (0, 0)
    assert len([r for r in caplog.records if "database unavailable" in r.getMessage()]) == 1
    # Once the lock is gone the same request is accepted.
    assert client.post("/features/content/", {"product_id": 501, "prompt": "a text"}, format="json").status_code == 202


def test_a_panel_action_whose_database_is_locked_answers_the_panels_503_page(django_user_model, client):
    """Pausing a queue writes its audit row: with the database locked, the panel's own 503 page (not the
    admin's, which would read the user again), and the queue is not paused without its audit row."""
    from queues import audit  # noqa: F401 (the audit row is what needs the database)
    from queues.models import AuditEntry
    from queues.worker.pause import paused_names

    user = django_user_model.objects.create_superuser("op", "op@example.com", "pw-long-enough-1")
    client.force_login(user)
    with database_locked("django_session", django_user_model._meta.db_table, AuditEntry._meta.db_table):
        response = client.post("/admin/queues/pause/default/")
    assert response.status_code == 503, response.content[:300]
    assert response["Retry-After"] == "5"
    assert b"Database unavailable" in response.content
    assert (AuditEntry.objects.count(), "default" in paused_names()) == (0, False)
