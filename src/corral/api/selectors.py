"""Label selectors and field selectors, parsed once and matched against object dicts.

Label selector syntax is Kubernetes': ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x)``,
``a`` (exists), ``!a`` (does not exist), comma-separated requirements that must all hold. Field
selectors take ``path=value``, ``path==value`` and ``path!=value``. No I/O here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable

__all__ = [
    "selector_string",
    "SelectorError",
    "LabelSelector",
    "FieldSelector",
    "parse_label_selector",
    "parse_field_selector",
    "label_selector_from_struct",
]


class SelectorError(ValueError):
    """A selector string that does not parse, or names a field that is not supported."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str] = frozenset()

    def matches(self, labels: dict[str, str]) -> bool:
        op = self.operator
        if op == "exists":
            return self.key in labels
        if op == "!":
            return self.key not in labels
        if op == "in" or op == "=":
            return labels.get(self.key) in self.values
        # "!=" and "notin" also match objects that lack the label, as in Kubernetes.
        return labels.get(self.key) not in self.values


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: dict[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def matches_object(self, obj: dict[str, Any]) -> bool:
        return self.matches((obj.get("metadata") or {}).get("labels"))


_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET_RE = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s+\(([^)]*)\)\s*$")
_OP_RE = re.compile(rf"^\s*({_KEY})\s*(==|!=|=)\s*({_VALUE})\s*$")
_EXISTS_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


def _split_requirements(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts, depth, current = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse a label selector string; raise :class:`SelectorError` naming the bad requirement."""
    if not text or not text.strip():
        return LabelSelector()
    requirements = []
    for part in _split_requirements(text):
        if m := _SET_RE.match(part):
            values = frozenset(v.strip() for v in m.group(4).split(",") if v.strip())
            if not values:
                raise SelectorError(f"for 'in', 'notin' operators, values set can't be empty: {part.strip()!r}")
            requirements.append(Requirement(m.group(1), m.group(3), values))
        elif m := _OP_RE.match(part):
            op = "=" if m.group(3) in ("=", "==") else "!="
            requirements.append(Requirement(m.group(1), op, frozenset([m.group(4)])))
        elif m := _EXISTS_RE.match(part):
            requirements.append(Requirement(m.group(2), "!" if m.group(1) else "exists"))
        else:
            raise SelectorError(f"unable to parse requirement: {part.strip()!r}")
    return LabelSelector(tuple(requirements))


def label_selector_from_struct(selector: dict[str, Any] | None) -> LabelSelector:
    """A ``metav1.LabelSelector`` (matchLabels, matchExpressions) as a :class:`LabelSelector`.

    ``None`` selects nothing in Kubernetes' API objects; callers decide; here it selects everything.
    """
    if not selector:
        return LabelSelector()
    reqs = [
        Requirement(k, "=", frozenset([v]))
        for k, v in sorted((selector.get("matchLabels") or {}).items())
    ]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in selector.get("matchExpressions") or []:
        op = ops.get(expr.get("operator"))
        if op is None:
            raise SelectorError(f"{expr.get('operator')!r} is not a valid label selector operator")
        reqs.append(Requirement(expr["key"], op, frozenset(expr.get("values") or ())))
    return LabelSelector(tuple(reqs))


_SET_OPERATORS = {"In": "in", "NotIn": "notin"}


def selector_string(selector: dict[str, Any] | None) -> str:
    """A LabelSelector as the string ``kubectl get -l`` takes: ``app=web,tier in (a,b),!legacy``."""
    selector = selector or {}
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or ():
        op, key = expr.get("operator"), expr.get("key")
        if op in _SET_OPERATORS:
            parts.append(f"{key} {_SET_OPERATORS[op]} ({','.join(sorted(expr.get('values') or ()))})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def _getter(path: str) -> Callable[[dict[str, Any]], Any]:
    parts = path.split(".")

    def get(obj: dict[str, Any]) -> Any:
        cur: Any = obj
        for p in parts:
            if not isinstance(cur, dict):
                return None
            cur = cur.get(p)
        return cur

    return get


def _as_field_string(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    path: str
    value: str
    negate: bool
    get: Callable[[dict[str, Any]], Any]

    def matches(self, obj: dict[str, Any]) -> bool:
        return (_as_field_string(self.get(obj)) == self.value) != self.negate


@dataclass(frozen=True, slots=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, obj: dict[str, Any]) -> bool:
        return all(r.matches(obj) for r in self.requirements)

    def exact(self, path: str) -> str | None:
        """The value ``path`` must equal, when the selector pins it (used to narrow lookups)."""
        for r in self.requirements:
            if r.path == path and not r.negate:
                return r.value
        return None


_FIELD_RE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9.]*)\s*(==|!=|=)\s*(.*?)\s*$")


def parse_field_selector(text: str | None, supported: Iterable[str]) -> FieldSelector:
    """Parse a field selector, accepting only the ``supported`` field paths."""
    if not text or not text.strip():
        return FieldSelector()
    allowed = {"metadata.name", "metadata.namespace", *supported}
    reqs = []
    for part in text.split(","):
        if not part.strip():
            continue
        m = _FIELD_RE.match(part)
        if m is None:
            raise SelectorError(f"invalid field selector requirement: {part.strip()!r}")
        path, op, value = m.groups()
        if path not in allowed:
            raise SelectorError(f'field label not supported: "{path}"')
        reqs.append(FieldRequirement(path, value, op == "!=", _getter(path)))
    return FieldSelector(tuple(reqs))
