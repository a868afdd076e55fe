"""Strict request fields of the feature API: a value of another JSON type is refused, not coerced.

DRF coerces by default ("12" -> 12, 0 -> "0"); the API promises JSON types in its schema, so a
value of another JSON type is refused with a message that names the type it got. Re-exported by
``features.api`` (``from features.api import StrictIntegerField``).
"""

import re

from django.core.validators import ProhibitNullCharactersValidator, RegexValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

JSON_TYPE_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


class _StrictJsonType:
    json_types = ()

    def to_internal_value(self, data):
        if isinstance(data, bool) and bool not in self.json_types or not isinstance(data, self.json_types):
            expected = " or ".join(JSON_TYPE_NAMES[t] for t in self.json_types)
            got = JSON_TYPE_NAMES.get(type(data), type(data).__name__)
            article = "an" if got[0] in "aeiou" else "a"
            raise serializers.ValidationError(f"Must be a JSON {expected}, got {article} {got}.", code="invalid")
        return super().to_internal_value(data)


class StrictIntegerField(_StrictJsonType, serializers.IntegerField):
    json_types = (int,)


class StrictCharField(_StrictJsonType, serializers.CharField):
    """A JSON string without NUL characters (a database text column refuses them).

    DRF refuses NUL with a validator the OpenAPI schema cannot show; this regex says the same
    thing in the schema (``pattern``), so a schema-valid string is never refused.
    """

    json_types = (str,)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.validators = [v for v in self.validators if not isinstance(v, ProhibitNullCharactersValidator)]
        self.validators.append(
            RegexValidator(r"^[^\x00]*$", "Null characters are not allowed.", code="null_characters_not_allowed")
        )


class StrictRegexField(_StrictJsonType, serializers.RegexField):
    json_types = (str,)


MONEY_PATTERN = r"^([1-9][0-9]{0,9}(\.[0-9]{1,2})?|0\.(0[1-9]|[1-9][0-9]?))$"


@extend_schema_field({"type": "string", "format": "decimal", "pattern": MONEY_PATTERN, "example": "19.90"})
class MoneyField(_StrictJsonType, serializers.DecimalField):
    """A positive amount as a JSON string ("19.90"; at most 10 digits before the point and 2 after).

    A string, because a JSON number is a binary float and may not hold the amount exactly.
    """

    json_types = (str,)

    def __init__(self, **kwargs):
        kwargs.setdefault("max_digits", 12)
        kwargs.setdefault("decimal_places", 2)
        kwargs.setdefault("coerce_to_string", True)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if isinstance(data, str) and not re.fullmatch(MONEY_PATTERN, data):
            raise serializers.ValidationError(
                "Must be a positive amount like '19.90' (digits, at most 2 after the point, no sign).", code="invalid"
            )
        return super().to_internal_value(data)
