from django.apps import AppConfig


class SellersConfig(AppConfig):
    name = "features.sellers"
    label = "sellers"
    default_auto_field = "django.db.models.BigAutoField"
