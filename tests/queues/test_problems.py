"""One conversion of a validator's problems: into system-check messages (``conf.check_messages``) and
into the refusal to go on (``conf.raise_first_error``), so a check and first use say the same words."""

import pytest
from django.core.checks import Error, Warning
from django.core.exceptions import ImproperlyConfigured

from queues import conf

PROBLEMS = [
    conf.Problem("queues.W999", "A warning.", "Look at it.", level="warning"),
    conf.Problem("queues.E998", "The first error.", "Fix this."),
    conf.Problem("queues.E999", "The second error.", ""),
]


def test_problems_become_errors_and_warnings_with_their_ids_messages_and_hints():
    assert conf.check_messages(PROBLEMS) == [
        Warning("A warning.", hint="Look at it.", id="queues.W999"),
        Error("The first error.", hint="Fix this.", id="queues.E998"),
        Error("The second error.", hint=None, id="queues.E999"),
    ]


def test_the_first_error_is_refused_with_the_checks_words_and_warnings_do_not_stop_anything():
    with pytest.raises(ImproperlyConfigured) as caught:
        conf.raise_first_error(PROBLEMS)
    assert str(caught.value) == "The first error. Fix this. (queues.E998; run manage.py check for all)"
    with pytest.raises(ImproperlyConfigured) as caught:
        conf.raise_first_error(PROBLEMS, see_check=False)
    assert str(caught.value) == "The first error. Fix this. (queues.E998)"
    assert conf.raise_first_error(PROBLEMS[:1]) is None
    assert conf.raise_first_error([]) is None
