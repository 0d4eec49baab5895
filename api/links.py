"""OpenAPI links from the operations that create a resource to those that read it, so a
client (or a fuzzer) follows an id from the answer that returned it."""

from __future__ import annotations


def links(param: str, *operation_ids: str) -> dict:
    """``{"links": ...}`` for a response whose body's ``id`` is ``param`` of each operation."""
    return {"links": {op.replace("-", "_"): {
        "operationId": op, "parameters": {param: "$response.body#/id"},
        "description": f"{op} with the {param} of this answer"} for op in operation_ids}}
