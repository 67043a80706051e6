"""Kubernetes resource quantities ("100m", "1.5", "500Mi", "2Gi", "1e3", "2k").

Parsing follows Kubernetes' ``resource.Quantity`` exactly: a signed decimal number followed by a
binary-SI suffix (Ki … Ei), a decimal-SI suffix (n, u, m, "", k, M, G, T, P, E) or a decimal exponent
(``e3``, ``E-2``). The value is kept as an exact :class:`fractions.Fraction`; conversion to the integer
units the scheduler counts in rounds *up*, as Kubernetes' ``MilliValue()`` and ``Value()`` do, so a
request is never under-counted.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

__all__ = ["QuantityError", "parse_quantity", "to_milli", "to_units", "format_cpu", "format_bytes"]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_PATTERN = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)


MAX_DIGITS = 64  # in the number part of a quantity
MAX_EXPONENT = 64  # |e| in 1e64: far past what int64 milli-units hold, either way


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


@lru_cache(maxsize=4096)
def _parse_str(text: str) -> Fraction:
    match = _PATTERN.match(text)
    if match is None:
        raise QuantityError(
            f"quantities must match the regular expression "
            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$', got {text!r}"
        )
    if len(match["num"]) > MAX_DIGITS:  # Python refuses past 4,300 digits; nothing real needs 40
        raise QuantityError(f"a quantity has at most {MAX_DIGITS} digits, got {len(match['num'])}")
    number = Fraction(match["num"])
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    exponent = int(suffix[1:]) if len(suffix) <= 8 else MAX_EXPONENT + 1
    if abs(exponent) > MAX_EXPONENT:  # 10**9999999 alone took 6 s of the server's loop
        raise QuantityError(f"a quantity's exponent is at most {MAX_EXPONENT} either way, got {suffix[:20]!r}")
    return number * Fraction(10) ** exponent


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a quantity as written in a manifest (a string, or a bare JSON number) exactly."""
    if isinstance(value, bool):
        raise QuantityError(f"a quantity must be a string or a number, got {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(f"a quantity must be finite, got {value!r}")
        return Fraction(repr(value))
    if not isinstance(value, str):
        raise QuantityError(f"a quantity must be a string or a number, got {type(value).__name__}")
    return _parse_str(value.strip())


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def to_milli(value: str | int | float) -> int:
    """Millicores (or milli-units): ``ceil(q * 1000)``, as Kubernetes' ``MilliValue()``."""
    return _milli_str(value) if type(value) is str else _ceil(parse_quantity(value) * 1000)


def to_units(value: str | int | float) -> int:
    """Whole units (bytes, pods): ``ceil(q)``, as Kubernetes' ``Value()``."""
    return _units_str(value) if type(value) is str else _ceil(parse_quantity(value))


# Every pod's requests are converted where it is created, admitted and scheduled, mostly the same few
# strings; the Fraction arithmetic was ~1.5 % of the scheduler's benchmark.
@lru_cache(maxsize=4096)
def _milli_str(text: str) -> int:
    return _ceil(parse_quantity(text) * 1000)


@lru_cache(maxsize=4096)
def _units_str(text: str) -> int:
    return _ceil(parse_quantity(text))


def format_cpu(millis: int) -> str:
    """``4000`` → ``"4"``, ``1500`` → ``"1500m"``: the shortest exact form."""
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def format_bytes(amount: int) -> str:
    """``34359738368`` → ``"32Gi"``: the largest binary suffix that divides exactly."""
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = _BINARY[suffix]
        if amount and amount % unit == 0:
            return f"{amount // unit}{suffix}"
    return str(amount)
