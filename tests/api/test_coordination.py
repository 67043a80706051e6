"""The heartbeat periods of node Leases as a cluster grows."""

from __future__ import annotations

import pytest

from corral.api.kinds.coordination import HeartbeatScale


@pytest.mark.parametrize("nodes, factor", [
    pytest.param(0, 1.0, id="an empty cluster"),
    pytest.param(10_000, 1.0, id="10,000 nodes renewing every 10 s: 1,000/s, the default rate"),
    pytest.param(20_000, 2.0, id="20,000 nodes: every heartbeat period twice as long"),
    pytest.param(50_000, 5.0, id="50,000 nodes: five times"),
])
def test_the_factor_keeps_renewals_at_the_default_rate(nodes, factor):
    assert HeartbeatScale().factor(nodes) == factor


@pytest.mark.parametrize("asked, lease", [
    pytest.param(40, 200, id="an agent's 40 s, at 50,000 nodes"),
    pytest.param(10, 50, id="a shorter lease asked for is scaled as asked"),
    pytest.param(10**6, 200, id="a longer lease than the grace period is not granted"),
    pytest.param(None, 200, id="no duration asked: the grace period"),
    pytest.param(True, 200, id="not a number: the grace period"),
    pytest.param(0, 200, id="nothing: the grace period"),
])
def test_the_lease_duration_written(asked, lease):
    assert HeartbeatScale().lease_seconds(asked, 40.0, 50_000) == lease


@pytest.mark.parametrize("interval, rate", [(0, 1000), (10, 0), (-1, 5)])
def test_heartbeat_settings_must_be_positive(interval, rate):
    with pytest.raises(ValueError, match="must be positive"):
        HeartbeatScale(interval, rate)
