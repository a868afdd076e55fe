"""The marketplace the feature modules talk to: HTTP client, per-cabinet rate limiter, and a fake
server for the run command and the tests (``python -m features.marketplace.fake``)."""
