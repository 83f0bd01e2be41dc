"""Generated tool arguments validate against their JSON schemas (checked with the jsonschema package)."""

from __future__ import annotations

import random
from typing import Any

import jsonschema
import pytest

from toolwire.testing.fake._schema_values import schema_example

SCHEMAS: dict[str, dict[str, Any]] = {
    "enums-and-required": {
        "type": "object",
        "properties": {"unit": {"enum": ["c", "f"]}, "city": {"type": "string"}, "note": {"type": "string"}},
        "required": ["unit", "city"],
        "additionalProperties": False,
    },
    "numbers": {
        "type": "object",
        "properties": {
            "count": {"type": "integer", "minimum": 3, "maximum": 9},
            "even": {"type": "integer", "multipleOf": 2, "exclusiveMinimum": 10, "exclusiveMaximum": 20},
            "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
            "price": {"type": "number", "minimum": 1.5, "maximum": 2.0},
            "step": {"type": "number", "multipleOf": 0.25, "minimum": 1, "maximum": 2},
            "negative": {"type": "integer", "maximum": -5},
        },
        "required": ["count", "even", "ratio", "price", "step", "negative"],
    },
    "strings": {
        "type": "object",
        "properties": {
            "short": {"type": "string", "maxLength": 3},
            "long": {"type": "string", "minLength": 25},
            "when": {"type": "string", "format": "date-time"},
            "day": {"type": "string", "format": "date"},
            "mail": {"type": "string", "format": "email"},
            "id": {"type": "string", "format": "uuid"},
            "ip": {"type": "string", "format": "ipv4"},
            "ip6": {"type": "string", "format": "ipv6"},
            "code": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{3}(-[a-z]+)?$"},
            "sku": {"type": "string", "pattern": "^(ab|cd)_\\d{2,4}\\.[^\\s]x$"},
        },
        "required": ["short", "long", "when", "day", "mail", "id", "ip", "ip6", "code", "sku"],
    },
    "arrays": {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True, "minItems": 2},
            "point": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}], "items": False},
            "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}, "maxItems": 2},
                       "minItems": 1, "maxItems": 2},
            "empty": {"type": "array", "maxItems": 0},
        },
        "required": ["tags", "point", "matrix", "empty"],
    },
    "nested-refs-and-defaults": {
        "type": "object",
        "$defs": {
            "person": {"type": "object", "properties": {"name": {"type": "string"},
                                                        "friend": {"$ref": "#/$defs/person"}},
                       "required": ["name"]},
        },
        "properties": {
            "owner": {"$ref": "#/$defs/person"},
            "limit": {"type": "integer", "default": 10},
            "mode": {"const": "fast"},
            "deep": {"type": "object", "properties": {"deeper": {"type": "object", "properties": {
                "deepest": {"type": "boolean"}}, "required": ["deepest"]}}, "required": ["deeper"]},
        },
        "required": ["owner", "limit", "mode", "deep"],
    },
    "unions": {
        "type": "object",
        "properties": {
            "maybe": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]},
            "either": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
            "both": {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                               {"properties": {"b": {"type": "string"}}, "required": ["b"]}]},
            "nullable": {"type": ["null", "integer"], "minimum": 5},
        },
        "required": ["maybe", "either", "both", "nullable"],
    },
    "min-properties": {"type": "object", "minProperties": 2, "additionalProperties": {"type": "integer"}},
}

# Schemas written the way some providers and frameworks write them; checked by hand below.
GEMINI_STYLE = {"type": "OBJECT", "properties": {"n": {"type": "INTEGER"}, "s": {"type": "STRING"}},
                "required": ["n", "s"]}


def validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_examples_are_valid_for_many_seeds(name: str) -> None:
    schema = SCHEMAS[name]
    check = validator(schema)
    values = []
    for seed in range(40):
        value = schema_example(schema, random.Random(seed))
        errors = [e.message for e in check.iter_errors(value)]
        assert not errors, f"seed {seed}: {value!r}: {errors}"
        values.append(value)
    assert len({repr(v) for v in values}) > 1 or name == "min-properties"


def test_same_seed_same_value() -> None:
    schema = SCHEMAS["strings"]
    assert schema_example(schema, random.Random("x")) == schema_example(schema, random.Random("x"))


def test_property_names_and_defaults_give_sensible_values() -> None:
    value = schema_example({"type": "object", "properties": {"city": {"type": "string"},
                                                             "email": {"type": "string"},
                                                             "limit": {"type": "integer", "default": 5}},
                            "required": ["city", "email", "limit"]}, random.Random(1))
    assert value["city"] in {"Paris", "Tokyo", "Lisbon", "Nairobi", "Montreal"}
    assert "@" in value["email"]
    assert value["limit"] == 5


def test_provider_style_type_names() -> None:
    value = schema_example(GEMINI_STYLE, random.Random(0))
    assert isinstance(value["n"], int) and isinstance(value["s"], str)
    value = schema_example({"type": "object", "properties": {"age": {"type": "int"}, "name": {"type": "str"}},
                            "required": ["age", "name"]}, random.Random(0))
    assert isinstance(value["age"], int) and isinstance(value["name"], str)
