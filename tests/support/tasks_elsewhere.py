"""A @task in a module that is no job module (tests.queues is not one): built fine, never a job."""

from django_tasks import task


@task
def not_in_a_job_module(x):
    return x
