"""The ports' one C integer arithmetic: truncation toward zero, and division by zero as undefined."""

from __future__ import annotations

from typing import Any

import pytest

from mla_golden.reference import UndefinedResultError
from mla_golden.reference._cint import c_div, c_mod, integer_divide_ceil


@pytest.mark.parametrize(
    ("a", "b", "quotient", "remainder"),
    [(7, 2, 3, 1), (-7, 2, -3, -1), (7, -2, -3, 1), (-7, -2, 3, -1), (0, 5, 0, 0), (6, 3, 2, 0)],
)
def test_c_division_truncates_toward_zero(a: int, b: int, quotient: int, remainder: int) -> None:
    assert c_div(a, b) == quotient and c_mod(a, b) == remainder
    assert c_div(a, b) * b + c_mod(a, b) == a


@pytest.mark.parametrize(("x", "y", "ceil"), [(7, 2, 4), (8, 2, 4), (0, 4, 0), (-6, 4, 0), (-7, 4, -1)])
def test_integer_divide_ceil_is_c_of_x_plus_y_minus_1_over_y(x: int, y: int, ceil: int) -> None:
    assert integer_divide_ceil(x, y) == ceil


@pytest.mark.parametrize("helper", [c_div, c_mod, integer_divide_ceil])
def test_division_by_zero_is_undefined_not_a_crash(helper: Any) -> None:
    with pytest.raises(UndefinedResultError, match="divides by zero"):
        helper(5, 0)
