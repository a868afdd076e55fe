"""``queues_wrap`` (queues/templatetags/queues_wrap.py): long ids wrap at their separators, never inside a word;
random hex tokens may break anywhere; everything escaped."""

from django.template import Context, Template
from django.utils.safestring import mark_safe

from queues.templatetags.queues_wrap import wrap_html, wrap_id


def test_an_id_gets_a_break_opportunity_after_each_separator_and_none_inside_a_word():
    assert wrap_id("features.orders.MarketplaceRejected") == "features.<wbr>orders.<wbr>MarketplaceRejected"
    assert wrap_id("schedule-orders:sync") == "schedule-<wbr>orders:<wbr>sync"
    assert wrap_id("queue--name") == "queue--<wbr>name"  # a run of separators: one break after it


def test_a_short_value_is_left_whole():
    assert wrap_id("1/1") == "1/1"  # the dead-letter list's attempts
    assert wrap_id("12:30 a.b") == "12:30 a.b"
    assert wrap_id("a.b tests.jobs.add") == "a.b tests.<wbr>jobs.<wbr>add"  # each run without spaces by itself


def test_no_break_after_a_separator_that_ends_a_word():
    assert wrap_id("content, default") == "content, default"  # the space breaks there already
    assert wrap_id("orders.sync.") == "orders.<wbr>sync."


def test_a_random_hex_token_may_break_anywhere_a_word_may_not():
    shown = wrap_id("test-5ea118e409:worker:023b7da6575f4d4499830f9e6e70a7b7")
    assert shown == (
        'test-<wbr>5ea118e409:<wbr>worker:<wbr><span class="rq-token">023b7da6575f4d4499830f9e6e70a7b7</span>'
    )
    assert "rq-token" not in wrap_id("deadbeefdeadbee")  # 15 digits: too short to be a random id
    assert "rq-token" not in wrap_id("0123456789abcdefg")  # a letter past f: a word, not a token


def test_text_is_escaped_and_entities_and_tags_are_never_split():
    assert wrap_id("<script>orders.sync</script> & c") == "&lt;script&gt;orders.<wbr>sync&lt;/script&gt; &amp; c"
    cell = mark_safe('<td class="field-func_path"><a href="/x/y-z/">tests.jobs.add</a></td>')
    assert wrap_html(cell) == '<td class="field-func_path"><a href="/x/y-z/">tests.<wbr>jobs.<wbr>add</a></td>'
    assert wrap_id(None) == "" and wrap_id("") == ""


def test_the_filter_in_a_template_is_not_escaped_twice():
    rendered = Template("{% load queues_wrap %}{{ v|wrap_id }}").render(Context({"v": "orders.sync&c"}))
    assert rendered == "orders.<wbr>sync&amp;c"
