"""Splitting a page's runs across processes (``shard=i/n``) and checking the device option."""

from __future__ import annotations

import pytest

from layerwise.benchmarks.sharding import check_device, check_shard, in_shard


def test_shards_cover_every_item_once_in_order():
    items = list("abcdefg")
    shares = [in_shard(items, f"{i}/3") for i in range(3)]
    assert shares == [["a", "d", "g"], ["b", "e"], ["c", "f"]]
    assert in_shard(items, None) == items


def test_a_group_stays_in_one_shard():
    items = [("mlm", 0), ("tmft", 1), ("mlm", 0), ("tmft", 2)]
    shares = [in_shard(items, f"{i}/2", group=lambda x: x if x[0] != "mlm" else "mlm") for i in range(2)]
    assert shares == [[("mlm", 0), ("mlm", 0), ("tmft", 2)], [("tmft", 1)]]


@pytest.mark.parametrize("bad", ["2/2", "1", "a/b", "-1/3", "1/0", "0/2/4"])
def test_bad_shards_are_refused_with_the_form_named(bad):
    with pytest.raises(ValueError, match=r"^mypage page: shard=.* is invalid: use 'i/n' with 0 <= i < n"):
        check_shard("mypage", bad)


def test_good_shards_and_devices_pass():
    check_shard("p", None), check_shard("p", "0/1"), check_shard("p", "3/8")
    check_device("p", None), check_device("p", "cpu"), check_device("p", "cuda:1")  # named, not opened
    with pytest.raises(ValueError, match="p page: device='gpu0' is not a torch device"):
        check_device("p", "gpu0")
