from django.apps import AppConfig


class OrdersConfig(AppConfig):
    name = "features.orders"
    label = "orders"
    default_auto_field = "django.db.models.BigAutoField"
