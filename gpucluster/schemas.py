"""JSON Schema validation with validators built once per process.

``jsonschema.validate(instance, schema)`` checks the *schema* against its meta-schema and
builds a new validator on every call; for the catalog's overlays and mixins that was most of
the time of ``gpucluster plan``. :func:`validate` keeps one validator per schema object
(the schemas are module-level constants) and raises exactly what ``jsonschema.validate``
raises for an invalid instance (``jsonschema.exceptions.best_match`` of the errors). The
schemas themselves are checked against their meta-schema by the tests
(tests/test_schema_cache.py), not on every run.
"""

from __future__ import annotations

from typing import Any

_VALIDATORS: dict[int, tuple[Any, Any]] = {}


def validator(schema: dict[str, Any]) -> Any:
    """The jsonschema validator of ``schema`` (its ``$schema`` dialect, default the latest),
    built on first use and kept for the process (keyed by the schema object's identity)."""
    hit = _VALIDATORS.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    import jsonschema

    built = jsonschema.validators.validator_for(schema)(schema)
    _VALIDATORS[id(schema)] = (schema, built)
    return built


def validate(instance: Any, schema: dict[str, Any]) -> None:
    """Validate ``instance`` against ``schema`` like ``jsonschema.validate``.

    Raises:
        jsonschema.ValidationError: the best-matching error (same as ``jsonschema.validate``).
    """
    from jsonschema.exceptions import best_match

    error = best_match(validator(schema).iter_errors(instance))
    if error is not None:
        raise error
