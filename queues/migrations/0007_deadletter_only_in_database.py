from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0006_deadletter_carried"),
    ]

    operations = [
        migrations.AddField(
            model_name="deadletter",
            name="only_in_database_since",
            field=models.DateTimeField(
                blank=True,
                help_text="when reconcile found its job gone from Redis: held only in the database; "
                "a retry re-enqueues it from this row",
                null=True,
            ),
        ),
        migrations.AlterField(
            model_name="deadletter",
            name="status",
            field=models.CharField(
                choices=[
                    ("open", "open"),
                    ("retried", "retried"),
                    ("discarded", "discarded"),
                    ("stopped", "stopped by an operator"),
                ],
                db_index=True,
                default="open",
                max_length=16,
            ),
        ),
    ]
