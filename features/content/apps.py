from django.apps import AppConfig


class ContentConfig(AppConfig):
    name = "features.content"
    label = "content"
    default_auto_field = "django.db.models.BigAutoField"
