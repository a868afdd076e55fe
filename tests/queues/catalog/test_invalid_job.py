"""InvalidJob says why a dotted path is not a job, naming its module: a newcomer's app missing from INSTALLED_APPS
is the usual cause (docs/install.md), and the message says so rather than showing an example of this repository."""

import pytest

import queues
from queues import InvalidJob


def test_a_job_of_an_app_not_installed_names_its_module_and_installed_apps():
    with pytest.raises(InvalidJob) as caught:
        queues.enqueue("default", "shipping.jobs.print_label", 42)
    message = str(caught.value)
    assert message.startswith("func 'shipping.jobs.print_label' is not a declared job")
    assert (
        "'shipping.jobs' was never loaded: no app in INSTALLED_APPS contains it (add 'shipping' to INSTALLED_APPS: "
        "its jobs.py is found at start-up) and QUEUE_JOB_MODULES does not name it." in message
    )
    assert "features." not in message


def test_an_undecorated_name_in_a_job_module_says_the_module_declares_no_such_job():
    with pytest.raises(InvalidJob) as caught:
        queues.enqueue("default", "tests.jobs.sample.does_not_exist")
    assert "'tests.jobs.sample' is a job module, but it declares no 'does_not_exist'." in str(caught.value)
    assert "features." not in str(caught.value)


def test_a_module_outside_every_app_and_setting_is_named():
    with pytest.raises(InvalidJob) as caught:
        queues.enqueue("default", "os.system", "true")
    assert "'os' is neither an installed app's jobs module nor named in QUEUE_JOB_MODULES." in str(caught.value)
