"""Example values for JSON schemas: what the automatic responder passes as tool arguments.

`schema_example(schema, rng)` returns a value that validates against `schema` for the schemas tools
use in practice: types (also Gemini's upper-case `OBJECT` and a few Python names), `enum`, `const`,
`default` and `examples`, `required` and optional properties, nested objects and arrays (`items`,
`prefixItems`, `minItems`, `maxItems`, `uniqueItems`), numeric bounds and `multipleOf`, string lengths,
`format`s and `pattern`s, `$ref` into `$defs`, and `anyOf` / `oneOf` / `allOf`. Strings follow the
property name where it says what it holds (`city` → a city). The same schema and seed give the same
value.
"""

from __future__ import annotations

import importlib
import math
import random
import re
import uuid
from typing import Any

__all__ = ["schema_example"]

_TYPE_ALIASES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "dict": "object",
                 "list": "array", "none": "null"}
_MAX_DEPTH = 6
"""Below this depth optional properties and array items are generated; deeper, only what is required."""
_GIVE_UP_DEPTH = 40

_HINTS: list[tuple[tuple[str, ...], list[str]]] = [
    (("city", "location", "place", "town"), ["Paris", "Tokyo", "Lisbon", "Nairobi", "Montreal"]),
    (("country",), ["France", "Japan", "Portugal", "Kenya", "Canada"]),
    (("email",), ["ada@example.com", "grace@example.org"]),
    (("url", "link", "website", "href", "uri"), ["https://example.com/docs", "https://example.org/page"]),
    (("timezone", "tz"), ["Europe/Paris", "Asia/Tokyo", "America/Toronto"]),
    (("currency",), ["EUR", "USD", "JPY"]),
    (("date", "day"), ["2024-05-17", "2025-01-31"]),
    (("path", "file", "filename"), ["notes/todo.txt", "data/report.csv"]),
    (("expression", "formula"), ["2 + 2", "17 * 3"]),
    (("query", "search", "keyword", "topic", "question"), ["streaming tool calls", "best coffee in Lisbon"]),
    (("name", "user", "author", "person"), ["Ada", "Grace", "Alan", "Edsger"]),
    (("color", "colour"), ["blue", "green", "orange"]),
    (("language", "lang"), ["en", "fr", "ja"]),
    (("text", "message", "content", "description", "prompt", "body", "note", "comment"),
     ["Hello from toolwire", "A short note"]),
]
_WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]


def schema_example(schema: Any, rng: random.Random, *, name: str = "") -> Any:
    """A value valid against `schema` (a JSON schema dict), chosen with `rng`."""
    return _Generator(schema, rng).value(schema, name, 0)


class _Generator:
    def __init__(self, root: Any, rng: random.Random) -> None:
        self.root = root
        self.rng = rng

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        ref = schema.get("$ref")
        seen = 0
        while isinstance(ref, str) and ref.startswith("#") and seen < 32:
            target: Any = self.root
            for key in ref[1:].split("/")[1:]:
                key = key.replace("~1", "/").replace("~0", "~")
                target = target.get(key, {}) if isinstance(target, dict) else {}
            merged = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **merged} if isinstance(target, dict) else merged
            ref = schema.get("$ref")
            seen += 1
        all_of = schema.get("allOf")
        if isinstance(all_of, list):
            merged = {k: v for k, v in schema.items() if k != "allOf"}
            for sub in all_of:
                if isinstance(sub, dict):
                    sub = self.resolve(sub)
                    properties = {**sub.get("properties", {}), **merged.get("properties", {})}
                    required = [*merged.get("required", []), *sub.get("required", [])]
                    merged = {**sub, **merged}
                    if properties:
                        merged["properties"] = properties
                    if required:
                        merged["required"] = list(dict.fromkeys(required))
            schema = merged
        return schema

    def value(self, schema: Any, name: str, depth: int) -> Any:
        if depth > _GIVE_UP_DEPTH:
            return None  # a schema that requires endless nesting has no finite instance
        if schema is True or not isinstance(schema, dict):
            return self.string({}, name)
        schema = self.resolve(schema)
        if "const" in schema:
            return schema["const"]
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return self.rng.choice(schema["enum"])
        if "default" in schema:
            return schema["default"]
        examples = schema.get("examples")
        if isinstance(examples, list) and examples:
            return self.rng.choice(examples)
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                return self.union(schema, key, options, name, depth)
        kind = self.kind(schema)
        if kind == "object":
            return self.object(schema, depth)
        if kind == "array":
            return self.array(schema, name, depth)
        if kind == "integer":
            return self.integer(schema)
        if kind == "number":
            return self.number(schema)
        if kind == "boolean":
            return self.rng.random() < 0.5
        if kind == "null":
            return None
        return self.string(schema, name)

    def union(self, schema: dict[str, Any], key: str, options: list[Any], name: str, depth: int) -> Any:
        usable = [o for o in options if not (isinstance(o, dict) and self.kind(self.resolve(o)) == "null")]
        base = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
        order = list(usable or options)
        self.rng.shuffle(order)
        first: Any = None
        for position, chosen in enumerate(order):
            value = self.value({**base, **chosen} if isinstance(chosen, dict) else chosen, name, depth + 1)
            if position == 0:
                first = value
            # oneOf needs exactly one match: avoid values whose type another branch also accepts
            # (an integer is a number too).
            others = [o for o in options if o is not chosen]
            if key == "anyOf" or not any(self.type_accepts(o, value) for o in others):
                return value
        return first

    def type_accepts(self, option: Any, value: Any) -> bool:
        if not isinstance(option, dict):
            return True
        option = self.resolve(option)
        if "type" not in option:
            if "enum" in option:
                return value in option["enum"]
            return "const" not in option or value == option["const"]
        kind = self.kind(option)
        checks = {"integer": isinstance(value, int) and not isinstance(value, bool),
                  "number": isinstance(value, (int, float)) and not isinstance(value, bool),
                  "string": isinstance(value, str), "boolean": isinstance(value, bool), "null": value is None,
                  "object": isinstance(value, dict), "array": isinstance(value, list)}
        return checks.get(kind, True)

    def kind(self, schema: dict[str, Any]) -> str:
        declared = schema.get("type")
        if isinstance(declared, list):
            named = [str(t).lower() for t in declared]
            declared = next((t for t in named if t != "null"), named[0] if named else None)
        if isinstance(declared, str):
            lowered = declared.lower()
            return _TYPE_ALIASES.get(lowered, lowered)
        if "properties" in schema or "required" in schema or "additionalProperties" in schema:
            return "object"
        if "items" in schema or "prefixItems" in schema:
            return "array"
        if any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")):
            return "number"
        return "string"

    def object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        required = [r for r in schema.get("required", []) if isinstance(r, str)]
        out: dict[str, Any] = {}
        for key, sub in properties.items():
            wanted = key in required or (depth < _MAX_DEPTH and self.rng.random() < 0.5)
            if wanted:
                out[key] = self.value(sub, key, depth + 1)
        for key in required:
            if key not in out:
                out[key] = self.string({}, key)  # required but not described: any value is allowed
        minimum = schema.get("minProperties", 0)
        for key, sub in properties.items():
            if len(out) >= minimum:
                break
            out.setdefault(key, self.value(sub, key, depth + 1))
        extra = schema.get("additionalProperties")
        while len(out) < minimum and extra is not False:
            out[f"extra_{len(out)}"] = self.value(extra if isinstance(extra, dict) else {}, "", depth + 1)
        return out

    def array(self, schema: dict[str, Any], name: str, depth: int) -> list[Any]:
        prefix = schema.get("prefixItems")
        items = schema.get("items")
        if isinstance(items, list):  # draft-4 tuple form
            prefix, items = items, schema.get("additionalItems", {})
        low = int(schema.get("minItems", 0))
        high = schema.get("maxItems")
        high = int(high) if isinstance(high, int) else max(low, 3)
        prefix = prefix if isinstance(prefix, list) else []
        count = max(low, len(prefix), min(high, self.rng.randint(1, 3) if depth < _MAX_DEPTH else low))
        count = min(count, high)
        singular = name[:-1] if name.endswith("s") else name
        out: list[Any] = []
        attempts = 0
        while len(out) < count and attempts < count * 20:
            attempts += 1
            index = len(out)
            sub = prefix[index] if index < len(prefix) else (items if items is not None else {})
            if sub is False:
                break
            value = self.value(sub, singular, depth + 1)
            if schema.get("uniqueItems") and value in out:
                continue
            out.append(value)
        return out

    def bounds(self, schema: dict[str, Any]) -> tuple[float, float, float, float]:
        low, high = schema.get("minimum"), schema.get("maximum")
        ex_low, ex_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        low_f = float(low) if isinstance(low, (int, float)) and not isinstance(low, bool) else -math.inf
        high_f = float(high) if isinstance(high, (int, float)) and not isinstance(high, bool) else math.inf
        # Draft 4 spelled exclusive bounds as booleans beside minimum/maximum.
        ex_low_f = float(ex_low) if isinstance(ex_low, (int, float)) and not isinstance(ex_low, bool) else (
            low_f if ex_low is True else -math.inf)
        ex_high_f = float(ex_high) if isinstance(ex_high, (int, float)) and not isinstance(ex_high, bool) else (
            high_f if ex_high is True else math.inf)
        if ex_low is True:
            low_f = -math.inf
        if ex_high is True:
            high_f = math.inf
        return low_f, high_f, ex_low_f, ex_high_f

    def integer(self, schema: dict[str, Any]) -> int:
        low, high, ex_low, ex_high = self.bounds(schema)
        candidates_low = [math.ceil(low)] if low > -math.inf else []
        candidates_low += [math.floor(ex_low) + 1] if ex_low > -math.inf else []
        candidates_high = [math.floor(high)] if high < math.inf else []
        candidates_high += [math.ceil(ex_high) - 1] if ex_high < math.inf else []
        lo = max(candidates_low) if candidates_low else None
        hi = min(candidates_high) if candidates_high else None
        if lo is None:
            lo = hi - 99 if hi is not None else 1
        if hi is None:
            hi = lo + 99
        step = schema.get("multipleOf")
        if isinstance(step, int) and step > 0:
            first = -(-lo // step) * step
            choices = range(first, hi + 1, step)
            return self.rng.choice(choices) if len(choices) else first
        return self.rng.randint(lo, max(lo, hi))

    def number(self, schema: dict[str, Any]) -> float | int:
        step = schema.get("multipleOf")
        if isinstance(step, int) and not isinstance(step, bool):
            return self.integer(schema)
        low, high, ex_low, ex_high = self.bounds(schema)
        lo, hi = max(low, ex_low), min(high, ex_high)
        lo_open, hi_open = ex_low >= low and ex_low > -math.inf, ex_high <= high and ex_high < math.inf
        if lo == -math.inf:
            lo, lo_open = (hi - 100 if hi < math.inf else 0.0), False
        if hi == math.inf:
            hi, hi_open = lo + 100, False
        if isinstance(step, float) and step > 0:
            first = math.ceil(lo / step) + (1 if lo_open and math.ceil(lo / step) * step == lo else 0)
            last = math.floor(hi / step) - (1 if hi_open and math.floor(hi / step) * step == hi else 0)
            return round(self.rng.randint(first, max(first, last)) * step, 10)

        def inside(v: float) -> bool:
            return (v > lo or (v == lo and not lo_open)) and (v < hi or (v == hi and not hi_open))

        # A whole number plus a half, inside the bounds: never an integer, so it cannot also match an
        # `integer` branch of a oneOf.
        value = round(self.rng.uniform(lo, hi) * 2) / 2
        if value == int(value):
            value = value + 0.5 if inside(value + 0.5) else value - 0.5
        return value if inside(value) else (lo + hi) / 2

    def string(self, schema: dict[str, Any], name: str) -> str:
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            sample = _from_pattern(pattern, self.rng)
            if sample is not None:
                return sample
        text = _FORMATS.get(str(schema.get("format", "")))
        value = text(self.rng) if text is not None else self.hinted(name)
        low = int(schema.get("minLength", 0))
        high = schema.get("maxLength")
        while len(value) < low:
            value += self.rng.choice(_WORDS)
        if isinstance(high, int) and len(value) > high:
            value = value[:high]
        return value

    def hinted(self, name: str) -> str:
        lowered = name.lower()
        for keys, samples in _HINTS:
            if any(key in lowered for key in keys):
                return self.rng.choice(samples)
        return self.rng.choice(_WORDS)


_FORMATS: dict[str, Any] = {
    "date-time": lambda rng: f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:30:00Z",
    "date": lambda rng: f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
    "time": lambda rng: f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00Z",
    "email": lambda rng: rng.choice(["ada@example.com", "grace@example.org"]),
    "idn-email": lambda rng: "ada@example.com",
    "uri": lambda rng: f"https://example.com/item/{rng.randint(1, 999)}",
    "url": lambda rng: f"https://example.com/item/{rng.randint(1, 999)}",
    "iri": lambda rng: "https://example.com/",
    "uri-reference": lambda rng: "/docs/index.html",
    "uuid": lambda rng: str(uuid.UUID(int=rng.getrandbits(128), version=4)),
    "ipv4": lambda rng: f"192.0.2.{rng.randint(1, 254)}",
    "ipv6": lambda rng: f"2001:db8::{rng.randint(1, 65535):x}",
    "hostname": lambda rng: rng.choice(["example.com", "api.example.org"]),
    "idn-hostname": lambda rng: "example.com",
    "duration": lambda rng: f"PT{rng.randint(1, 12)}H",
    "json-pointer": lambda rng: "/items/0",
    "regex": lambda rng: "^[a-z]+$",
}


def _from_pattern(pattern: str, rng: random.Random) -> str | None:
    """A string matching a regular expression, built from its parse tree (None when that fails)."""
    try:
        parsed = importlib.import_module("re._parser").parse(pattern)
        out: list[str] = []
        _emit(list(parsed), rng, out)
        text = "".join(out)
        return text if re.search(pattern, text) else None
    except Exception:
        return None


_CATEGORY_SAMPLES = {"CATEGORY_DIGIT": "0123456789", "CATEGORY_WORD": "abcxyz019_", "CATEGORY_SPACE": " ",
                     "CATEGORY_NOT_DIGIT": "abcxyz", "CATEGORY_NOT_WORD": "-. ", "CATEGORY_NOT_SPACE": "abc123"}


def _emit(items: list[tuple[Any, Any]], rng: random.Random, out: list[str]) -> None:
    for op, arg in items:
        kind = str(op)
        if kind == "LITERAL":
            out.append(chr(arg))
        elif kind == "NOT_LITERAL":
            out.append(next(c for c in "xa0" if ord(c) != arg))
        elif kind == "ANY":
            out.append("x")
        elif kind == "IN":
            out.append(_pick_in(arg, rng))
        elif kind == "BRANCH":
            _emit(list(rng.choice(arg[1])), rng, out)
        elif kind == "SUBPATTERN":
            _emit(list(arg[-1]), rng, out)
        elif kind in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, sub = arg
            for _ in range(rng.randint(low, min(high, low + 3))):
                _emit(list(sub), rng, out)
        elif kind == "CATEGORY":
            out.append(rng.choice(_CATEGORY_SAMPLES.get(str(arg), "a")))
        elif kind in ("AT", "ASSERT", "ASSERT_NOT"):
            continue
        else:
            raise ValueError(f"unsupported regular expression construct {kind}")


def _pick_in(items: list[tuple[Any, Any]], rng: random.Random) -> str:
    if items and str(items[0][0]) == "NEGATE":
        excluded = set()
        for op, arg in items[1:]:
            if str(op) == "LITERAL":
                excluded.add(chr(arg))
            elif str(op) == "RANGE":
                excluded.update(chr(c) for c in range(arg[0], arg[1] + 1))
        return next(c for c in "xqz7_-" if c not in excluded)
    op, arg = rng.choice(items)
    kind = str(op)
    if kind == "LITERAL":
        return chr(arg)
    if kind == "RANGE":
        return chr(rng.randint(arg[0], arg[1]))
    if kind == "CATEGORY":
        return rng.choice(_CATEGORY_SAMPLES.get(str(arg), "a"))
    raise ValueError(f"unsupported character class item {kind}")
