"""The whole-tensor pass sorts works as the walk does: by (tile, kv_start, kv_end), as Python sorts tuples."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from mla_golden.checks.decode_fast import sorted_by

rows = st.lists(st.tuples(st.integers(0, 4), st.integers(-3, 3), st.integers(-3, 3)), max_size=40)


def _rows(columns: tuple[torch.Tensor, ...]) -> list[tuple[int, ...]]:
    return list(zip(*(c.tolist() for c in columns)))


@given(rows)
def test_sorted_by_is_pythons_sort_of_the_key_tuples(keys: list[tuple[int, int, int]]) -> None:
    columns = tuple(torch.tensor([row[k] for row in keys], dtype=torch.int64) for k in range(3))
    ordered = sorted_by(*columns)
    assert _rows(ordered) == sorted(keys)
    if keys == sorted(keys):
        assert all(a is b for a, b in zip(ordered, columns)), "rows in order already: nothing gathered"


def test_works_out_of_tile_order_come_back_in_tile_order() -> None:
    tile = torch.tensor([0, 2, 1, 1, 2, 0])
    start = torch.tensor([0, 0, 0, 5, 5, 5])
    end = torch.tensor([5, 5, 5, 9, 9, 9])
    assert _rows(sorted_by(tile, start, end)) == [(0, 0, 5), (0, 5, 9), (1, 0, 5), (1, 5, 9), (2, 0, 5), (2, 5, 9)]
