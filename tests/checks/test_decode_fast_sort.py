"""The whole-tensor pass sorts works as the walk does: by (tile, kv_start, kv_end), stably, as Python sorts tuples."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from mla_golden.checks.decode_fast import sorted_by

rows = st.lists(st.tuples(st.integers(0, 4), st.integers(-3, 3), st.integers(-3, 3)), max_size=40)


@given(rows)
def test_sorted_by_is_pythons_stable_sort_of_the_key_tuples(keys: list[tuple[int, int, int]]) -> None:
    columns = [torch.tensor([row[k] for row in keys], dtype=torch.int64) for k in range(3)]
    want = sorted(range(len(keys)), key=lambda i: keys[i])
    order = sorted_by(*columns)
    if order is None:  # already in order: no permutation to apply
        assert want == list(range(len(keys)))
    else:
        assert order.tolist() == want


def test_works_out_of_tile_order_come_back_in_tile_order_keeping_their_order_within_a_tile() -> None:
    tile = torch.tensor([0, 2, 1, 1, 2, 0])
    start = torch.tensor([0, 0, 0, 5, 5, 5])
    end = torch.tensor([5, 5, 5, 9, 9, 9])
    order = sorted_by(tile, start, end)
    assert order is not None and order.tolist() == [0, 5, 2, 3, 1, 4]
