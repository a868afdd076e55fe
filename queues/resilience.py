"""At-least-once, graceful shutdown, Redis outages (placeholder: filled by the lifecycle work)."""


class ResilienceMixin:
    pass
