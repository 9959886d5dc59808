"""An OpenAPI 3.0 rendering of the 3.1 document, for the bundled Swagger UI.

The ``swagger_ui_bundle`` package ships Swagger UI 4.15, which renders OpenAPI 3.0 only
("Unable to render this definition" for 3.1). ``/openapi.json`` stays 3.1 (msgspec's
schemas are JSON Schema 2020-12, which is what 3.1 uses); ``/docs`` reads this 3.0 copy,
made by rewriting the few 2020-12 forms that 3.0's schema objects lack.
"""

from __future__ import annotations

import copy
from typing import Any

VERSION = "3.0.3"


def _schema(node: Any) -> Any:
    """One schema object (recursively) in OpenAPI 3.0 form."""
    if isinstance(node, list):
        return [_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _schema_child(key, value) for key, value in node.items()}
    for key in ("anyOf", "oneOf"):
        options = out.get(key)
        if isinstance(options, list) and {"type": "null"} in options:
            rest = [o for o in options if o != {"type": "null"}]
            del out[key]
            if len(rest) == 1:
                only = rest[0]
                out.update({"allOf": [only]} if "$ref" in only else only)
            else:
                out[key] = rest
            out["nullable"] = True
    if isinstance(out.get("type"), list):
        types = [t for t in out["type"] if t != "null"]
        out["nullable"] = len(types) < len(out["type"]) or out.get("nullable", False)
        out["type"] = types[0] if len(types) == 1 else types
    if "examples" in out:
        examples = out.pop("examples")
        if isinstance(examples, list) and examples:
            out.setdefault("example", examples[0])
    if out.pop("contentEncoding", None) == "base64":
        out["format"] = "byte"
    if "const" in out:
        out["enum"] = [out.pop("const")]
    return out


def _schema_child(key: str, value: Any) -> Any:
    if key in ("properties", "patternProperties"):
        return {name: _schema(sub) for name, sub in value.items()}
    if key in ("items", "additionalProperties", "not", "anyOf", "oneOf", "allOf"):
        return _schema(value) if not isinstance(value, bool) else value
    return value


def _walk_paths(node: Any) -> None:
    """Rewrite every ``schema`` found in paths (parameters, bodies, responses)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "schema":
                node[key] = _schema(value)
            else:
                _walk_paths(value)
    elif isinstance(node, list):
        for item in node:
            _walk_paths(item)


def to_openapi30(doc: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    out["openapi"] = VERSION
    schemas = out.get("components", {}).get("schemas", {})
    for name, schema in list(schemas.items()):
        schemas[name] = _schema(schema)
    _walk_paths(out.get("paths", {}))
    return out
