"""Periodic jobs: schedules declared in settings and apps (``schedules``), rq-scheduler under the
prefix (``scheduler``) and schedulers kept alive through outages (``supervision``).
"""
