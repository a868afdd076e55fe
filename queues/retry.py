"""Retry policy and the worker's failure handling (placeholder: filled by the lifecycle work)."""


class RetryMixin:
    pass
