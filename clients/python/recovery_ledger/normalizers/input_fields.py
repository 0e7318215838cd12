"""The field names of a tool's input, as the dotted paths providers report (``customer.email``,
``lines[0].amount``). A provider's answer may name the invalid field only if it is one of these: a
field name is upstream text too, and the one detail the model is asked to act on."""

from __future__ import annotations

from typing import Any, List

__all__ = ["input_fields_of"]


def input_fields_of(value: Any, max_fields: int = 500) -> List[str]:
    fields: List[str] = []

    def walk(node: Any, at: str, depth: int) -> None:
        if len(fields) >= max_fields or depth > 6:
            return
        if isinstance(node, (list, tuple)):
            for index, item in enumerate(node[:50]):
                path = f"{at}[{index}]"
                fields.append(path)
                walk(item, path, depth + 1)
        elif isinstance(node, dict):
            for key, item in node.items():
                path = f"{at}.{key}" if at else str(key)
                fields.append(path)
                walk(item, path, depth + 1)

    walk(value, "", 0)
    return fields
