from django.conf import settings
from django.db import models


class ContentGeneration(models.Model):
    """One content generation request and, once done, its text."""

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="content_generations",
        help_text="who asked (empty: before owners)",
    )
    product_id = models.PositiveBigIntegerField(db_index=True)
    prompt = models.TextField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    text = models.TextField(blank=True)
    error = models.TextField(blank=True, help_text="the last attempt's error, if it failed")
    job_id = models.CharField(max_length=200, blank=True, db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"content for product {self.product_id} ({self.status})"


class ContentBatch(models.Model):
    """Content generated for many products at once: a batch of one ``generate_content`` per product, whose
    ``on_complete`` (features/content/jobs.py: ``record_batch``) records how many succeeded and how many died."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="content_batches")
    batch_id = models.CharField(max_length=64, blank=True, db_index=True)
    products = models.PositiveIntegerField(default=0)
    succeeded = models.PositiveIntegerField(null=True, blank=True, help_text="empty until the batch completed")
    failed = models.PositiveIntegerField(null=True, blank=True, help_text="members dead-lettered")
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"content batch {self.batch_id} ({self.products} products)"
