"""The error channel's messages, as kubectl and the official client decode them."""

from __future__ import annotations

import json

from corral.streaming import channels


def test_an_exit_code_is_told_as_kubernetes_tells_it_so_kubectl_exits_with_it():
    message = channels.exit_status(3)
    assert message[0] == channels.ERROR
    status = json.loads(message[1:])
    assert status["status"] == "Failure" and status["reason"] == "NonZeroExitCode"
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]


def test_exit_zero_is_success_and_a_failure_carries_its_message():
    assert json.loads(channels.exit_status(0)[1:])["status"] == "Success"
    failed = json.loads(channels.failure("container c is not running")[1:])
    assert failed["status"] == "Failure" and failed["message"] == "container c is not running"


def test_a_resize_is_read_only_when_it_is_one():
    assert channels.resize_of(b'{"Width": 101, "Height": 33}') == (101, 33)
    assert channels.resize_of(b'{"Width": -1, "Height": 33}') is None
    assert channels.resize_of(b"not json") is None
    assert channels.resize_of(b'{"Width": 1}') is None
