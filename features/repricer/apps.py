from django.apps import AppConfig


class RepricerConfig(AppConfig):
    name = "features.repricer"
    label = "repricer"
    default_auto_field = "django.db.models.BigAutoField"
