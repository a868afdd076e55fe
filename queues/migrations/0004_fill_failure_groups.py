"""Fingerprints and failure groups of the dead letters that exist before 0003.

Rows are read in primary-key chunks (only the columns the fingerprint needs), their fingerprints
written with bulk_update, and the groups built in memory (one dict entry per fingerprint) then
inserted at the end: at 200,000 rows, tens of seconds on SQLite and PostgreSQL, not a row-by-row
upsert. ``count`` is the sum of the rows' ``times_dead`` (deaths, as ``queues.failures.mirror.count_death``
counts them); the example is the row of the latest death. Idempotent: rows that already have a
fingerprint are left alone, and groups are only created where none exists (a death mirrored while
this runs). Reversing empties the fingerprints and the groups.
"""

from django.db import migrations

CHUNK = 2000


def fill(apps, schema_editor):
    from queues.failures.fingerprint import MESSAGE_LIMIT, PATTERN_LIMIT, fingerprint, pattern

    DeadLetter = apps.get_model("queues", "DeadLetter")
    FailureGroup = apps.get_model("queues", "FailureGroup")
    db = schema_editor.connection.alias
    rows = DeadLetter.objects.using(db).filter(fingerprint="").order_by("pk")
    groups = {}
    last_pk = 0
    while True:
        chunk = list(
            rows.filter(pk__gt=last_pk).only(
                "pk", "prefix", "queue", "func_path", "exc_type", "exc_message", "dead_at", "times_dead"
            )[:CHUNK]
        )
        if not chunk:
            break
        last_pk = chunk[-1].pk
        for row in chunk:
            row.fingerprint = fingerprint(row.func_path, row.exc_type, row.exc_message)
            group = groups.get((row.prefix, row.fingerprint))
            if group is None:
                groups[(row.prefix, row.fingerprint)] = group = {
                    "func_path": row.func_path,
                    "exc_type": row.exc_type,
                    "count": 0,
                    "queues": set(),
                    "pattern": pattern(row.exc_message)[:PATTERN_LIMIT],
                    "first_seen": row.dead_at,
                    "last_seen": row.dead_at,
                    "example_id": row.pk,
                    "example_message": row.exc_message[:MESSAGE_LIMIT],
                }
            group["count"] += row.times_dead
            group["queues"].add(row.queue)
            group["first_seen"] = min(group["first_seen"], row.dead_at)
            if row.dead_at >= group["last_seen"]:
                group["last_seen"], group["example_id"] = row.dead_at, row.pk
                group["example_message"] = row.exc_message[:MESSAGE_LIMIT]
        DeadLetter.objects.using(db).bulk_update(chunk, ["fingerprint"], batch_size=500)
    existing = set(FailureGroup.objects.using(db).values_list("prefix", "fingerprint"))
    FailureGroup.objects.using(db).bulk_create(
        [
            FailureGroup(
                prefix=prefix,
                fingerprint=fp,
                func_path=g["func_path"],
                exc_type=g["exc_type"],
                pattern=g["pattern"],
                example_message=g["example_message"],
                example_id=g["example_id"],
                count=g["count"],
                first_seen=g["first_seen"],
                last_seen=g["last_seen"],
                queues=sorted(g["queues"]),
            )
            for (prefix, fp), g in groups.items()
            if (prefix, fp) not in existing
        ],
        batch_size=500,
    )


def empty(apps, schema_editor):
    db = schema_editor.connection.alias
    apps.get_model("queues", "FailureGroup").objects.using(db).all().delete()
    apps.get_model("queues", "DeadLetter").objects.using(db).exclude(fingerprint="").update(fingerprint="")


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0003_failure_groups"),
    ]

    operations = [
        migrations.RunPython(fill, empty),
    ]
