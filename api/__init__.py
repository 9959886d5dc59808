"""The REST API: FastAPI routes per resource, msgspec schemas, one error mapping, auth."""
