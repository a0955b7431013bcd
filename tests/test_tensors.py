"""The whole-tensor helpers give what torch's plain operations give, for every dtype and size they take."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from mla_golden.tensors import _BLOCK_ROWS, flat_nonzero, running_difference, same, widened_columns


@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.int8, torch.uint8, torch.int64])
@pytest.mark.parametrize("rows", [0, 1, _BLOCK_ROWS - 1, _BLOCK_ROWS, 2 * _BLOCK_ROWS + 5])
def test_widened_columns_is_the_table_as_int64_each_column_contiguous(dtype: torch.dtype, rows: int) -> None:
    info = dtype_extremes(dtype, rows)
    columns = widened_columns(info)
    assert columns.dtype == torch.int64 and columns.shape == info.shape
    assert torch.equal(columns, info.to(torch.int64))  # values above int32's range and negatives kept
    assert all(columns[:, j].is_contiguous() for j in range(info.shape[1]))


def test_widened_columns_of_a_strided_slice_reads_only_its_rows() -> None:
    info = dtype_extremes(torch.int32, 3 * _BLOCK_ROWS)
    part = info[5 : 2 * _BLOCK_ROWS + 7]
    assert torch.equal(widened_columns(part), part.to(torch.int64))


def dtype_extremes(dtype: torch.dtype, rows: int) -> torch.Tensor:
    """``rows`` rows of eight, cycling through the dtype's smallest, largest and a few plain values."""
    info = torch.iinfo(dtype)
    values = torch.tensor([info.min, info.max, 0, 1, -1 if info.min < 0 else 2, 7, info.max - 1, info.min + 1])
    flat = values[torch.arange(rows * 8) % values.numel()] if rows else torch.zeros(0, dtype=torch.int64)
    return flat.to(dtype).reshape(rows, 8)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.uint8])
def test_running_difference_sums_end_minus_start_without_overflow(dtype: torch.dtype) -> None:
    table = dtype_extremes(dtype, 1000)
    end, start = table[:, 1], table[:, 0]  # strided columns, as a work table's are: max - min in each row
    wide = end.to(torch.int64) - start.to(torch.int64)  # an int32 max - min overflows int32: the sum must not
    expected = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(wide, 0)])
    assert torch.equal(running_difference(end, start), expected)
    assert running_difference(end[:0], start[:0]).tolist() == [0]


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8])
def test_clamped_run_is_the_running_max_of_the_non_negative_values_capped(dtype: torch.dtype) -> None:
    from mla_golden.geometry import clamped_run

    generator = torch.Generator().manual_seed(7)
    low = 0 if dtype == torch.uint8 else -50
    values = torch.randint(low, 200, (5000,), generator=generator).to(dtype)
    for limit in (0, 120, 10**6):
        expected, floor = [], 0
        for v in values.tolist():
            floor = min(max(v, floor), limit)
            expected.append(floor)
        assert clamped_run(values, limit).tolist() == expected
    assert values.dtype == dtype and int(values.min()) == low and clamped_run(values[:0], 5).numel() == 0


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.bool, torch.uint64])
@pytest.mark.parametrize("rows", [0, 1, 1000])
def test_same_is_torch_equal(dtype: torch.dtype, rows: int) -> None:
    base = dtype_extremes(torch.int64, rows).to(dtype) if dtype != torch.uint64 else torch.arange(rows * 8).to(dtype).reshape(rows, 8)
    other = base.clone()
    cases = [(base, other), (base, other.reshape(-1)), (base, other.t().contiguous().t()), (base.t(), other.t())]
    if rows:
        changed = base.clone()
        changed.view(-1)[-1] = changed.view(-1)[-2] if dtype != torch.bool else ~changed.view(-1)[-1]
        cases += [(base, changed), (base[:, :4], base[:, 4:]), (base, base.to(torch.int16 if dtype != torch.int16 else torch.int32))]
    for x, y in cases:
        assert _outcome(same, x, y) == _outcome(torch.equal, x, y), (x.shape, y.shape, x.dtype, y.dtype)


def _outcome(equal: Callable[[torch.Tensor, torch.Tensor], bool], x: torch.Tensor, y: torch.Tensor) -> object:
    """What ``equal`` answers, or the type of what it raises (torch.equal refuses uint64 against int16)."""
    try:
        return equal(x, y)
    except RuntimeError as exc:
        return type(exc)


@pytest.mark.parametrize("size", [0, 1, 17, 100_000])
def test_flat_nonzero_is_torch_nonzero(size: int) -> None:
    flags = torch.arange(size) % 7 == 3
    assert torch.equal(flat_nonzero(flags), flags.nonzero().reshape(-1))
    assert flat_nonzero(flags).dtype == torch.int64


def test_same_reads_bools_as_torch_does_whatever_their_bytes() -> None:
    """A bool viewed from bytes may hold 2 for True: equal to 1 as a bool, though not as a byte."""
    twos = torch.tensor([2, 1, 0], dtype=torch.uint8).view(torch.bool)
    ones = torch.tensor([1, 1, 0], dtype=torch.uint8).view(torch.bool)
    assert same(twos, ones) == torch.equal(twos, ones) is True
    assert same(twos, torch.tensor([1, 0, 0], dtype=torch.bool)) is False
