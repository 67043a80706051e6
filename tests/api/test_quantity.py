from fractions import Fraction

import pytest

from corral.api.quantity import QuantityError, format_bytes, format_cpu, parse_quantity, to_milli, to_units


@pytest.mark.parametrize(
    "text, millis, units",
    [
        pytest.param("100m", 100, 1, id="millicores stay exact and round up to one whole unit"),
        pytest.param("1.5", 1500, 2, id="a decimal fraction of a core"),
        pytest.param("2", 2000, 2, id="a plain integer"),
        pytest.param(2, 2000, 2, id="a bare JSON integer"),
        pytest.param(0.5, 500, 1, id="a bare JSON float"),
        pytest.param("500Mi", 500 * 2**20 * 1000, 500 * 2**20, id="binary mebibytes"),
        pytest.param("2Gi", 2 * 2**30 * 1000, 2 * 2**30, id="binary gibibytes"),
        pytest.param("1e3", 1_000_000, 1000, id="a decimal exponent"),
        pytest.param("1E-3", 1, 1, id="a negative exponent"),
        pytest.param("2k", 2_000_000, 2000, id="decimal kilo"),
        pytest.param("1M", 10**9, 10**6, id="decimal mega is not mebi"),
        pytest.param("0.1m", 1, 1, id="sub-millicore values round up as Kubernetes' MilliValue does"),
        pytest.param("1n", 1, 1, id="nano rounds up"),
        pytest.param(".5", 500, 1, id="a leading dot"),
        pytest.param("+3", 3000, 3, id="an explicit plus sign"),
    ],
)
def test_quantities_parse_as_kubernetes_parses_them(text, millis, units):
    assert to_milli(text) == millis
    assert to_units(text) == units


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "10Mb", "1Ki2", "m", "1 Gi", "--1", True, None])
def test_malformed_quantities_are_refused(text):
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_negative_quantities_parse_exactly():
    assert parse_quantity("-1.5Gi") == Fraction(-3, 2) * 2**30


def test_formatting_uses_the_shortest_exact_form():
    assert [format_cpu(m) for m in (4000, 1500, 100)] == ["4", "1500m", "100m"]
    assert [format_bytes(b) for b in (32 * 2**30, 500 * 2**20, 1000)] == ["32Gi", "500Mi", "1000"]
