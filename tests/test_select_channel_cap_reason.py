"""SELECTION.md §7: the reason of a channel count names the cap that actually clamps it.

A policy's ``max_channels`` or scope cap above nec.h's NEC_MAX_CHANNELS (32) cannot raise the
count past 32: the clamp is NEC_MAX_CHANNELS's, and the reason says so (it named
``max_channels_inter`` before, the scope cap min(64, 32) listed ahead of the rings)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from nrtrewrite.codes import DType, EncAlgType, EncOpType
from nrtrewrite.policy import DEFAULT_POLICY, MiB
from nrtrewrite.select import Request, choose_channels
from nrtrewrite.topology import load_topology

T2N = load_topology("trn2:nodes=2", world=(), lnc_size=2)    # 128 ranks, 64 a node

# 64 MiB of bf16 over both nodes: 256 KiB a channel wants 64 MiB / 256 KiB = 256 channels;
# 64 elements per rank per channel allow 32 Mi / (128 * 64) = 4096; the group has 32
# distinct rings (test_audit41_compose: eight rotations of the four variants)
R = Request.for_op(EncOpType.ALLREDUCE, DType.BF16, tuple(range(128)), 64 * MiB)


def _count(**policy):
    return choose_channels(T2N, R, EncAlgType.RING, replace(DEFAULT_POLICY, **policy))


def test_a_policy_max_channels_above_32_is_clamped_by_nec_max_channels_not_the_scope_cap():
    n, why = _count(max_channels=64, max_channels_inter=64)
    assert n == 32
    assert why.endswith("capped at 32 by NEC_MAX_CHANNELS 32 (nec.h; the policy's "
                        "max_channels 64 is above it)"), why
    assert "max_channels_inter" not in why


def test_the_scope_cap_is_named_when_it_is_the_smaller():
    # max_channels 64 still clamps at 32, the inter-node cap 16 is below it
    n, why = _count(max_channels=64, max_channels_inter=16)
    assert n == 16 and why.endswith("capped at 16 by max_channels_inter"), why


def test_a_policy_max_channels_below_32_is_named_alone():
    # 8 is the policy's own cap, not NEC_MAX_CHANNELS (32)
    n, why = _count(max_channels=8, max_channels_inter=64)
    assert n == 8 and why.endswith("capped at 8 by max_channels"), why


def test_the_default_max_channels_is_named_with_nec_max_channels():
    # max_channels 32 = NEC_MAX_CHANNELS, ahead of the scope cap min(64, 32) at the same 32
    n, why = _count(max_channels_inter=64)
    assert n == 32 and why.endswith("capped at 32 by max_channels (NEC_MAX_CHANNELS)"), why


def test_a_policy_max_channels_below_1_is_named_as_the_1_channel_it_leaves():
    # max_channels 0 (or -3) leaves the 1 channel every collective runs: the reason said
    # "capped at 0 by max_channels" while the count was 1
    for cap in (0, -3):
        n, why = _count(max_channels=cap)
        assert n == 1
        assert why.endswith(f"capped at 1 by max_channels (the policy's {cap}: a collective "
                            "runs at least 1 channel)"), why
        assert "capped at 0" not in why and "capped at -3" not in why


def test_a_scope_cap_below_1_is_named_as_the_1_channel_it_leaves():
    # the group spans both nodes: max_channels_inter is its scope cap
    n, why = _count(max_channels_inter=0)
    assert n == 1 and why.endswith("capped at 1 by max_channels_inter (the policy's 0: a "
                                   "collective runs at least 1 channel)"), why


@pytest.mark.parametrize("name", ["bytes_per_channel", "min_elements_per_rank_channel"])
@pytest.mark.parametrize("value", [0, -1, 1.5, True, None])
def test_a_policy_the_channel_rule_cannot_divide_by_is_refused_naming_the_field(name, value):
    """SELECTION.md §9: the channel rule divides the message's bytes by ``bytes_per_channel``
    and its elements by ``min_elements_per_rank_channel``: a 0 raised ZeroDivisionError in
    ``choose_channels`` (until 2026-12-06); each must be a positive integer."""
    with pytest.raises(ValueError) as err:
        replace(DEFAULT_POLICY, **{name: value})
    assert str(err.value) == f"Policy.{name} must be a positive integer, not {value!r}"


def test_the_smallest_policy_the_channel_rule_takes_still_counts():
    """1 byte a channel and 1 element per rank per channel: 64 MiB wants 2^26 channels, the
    128 ranks allow 2^25 / 128 = 262144, so the smallest cap holds: the default policy's
    max_channels_inter, 16 (one channel per device of a node), below the group's 32 rings
    and NEC_MAX_CHANNELS' 32."""
    n, why = _count(bytes_per_channel=1, min_elements_per_rank_channel=1)
    assert n == 16
    assert "capped at 16 by max_channels_inter" in why
