from django.apps import AppConfig


class NewsletterConfig(AppConfig):
    name = "tests.features.newfeature"
    label = "newsletter"
