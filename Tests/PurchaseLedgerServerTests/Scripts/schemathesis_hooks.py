"""Hooks for OpenAPITests' schemathesis run (SCHEMATHESIS_HOOKS=schemathesis_hooks): JSON Lines
bodies (POST /v1/events) go as text, a line of JSON per element when schemathesis generates
something else than text; it has no serializer of its own for those media types."""
import json

import schemathesis


@schemathesis.serializer("application/x-ndjson", "application/jsonl", "application/x-jsonlines", "application/json-lines")
def json_lines(ctx, value):
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, list):
        return "".join(json.dumps(element) + "\n" for element in value).encode("utf-8")
    return (json.dumps(value) + "\n").encode("utf-8")
