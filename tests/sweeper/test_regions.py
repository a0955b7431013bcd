"""How a sweep names where it diverged: each axis value once, and no value a reader could split in two."""

from __future__ import annotations

from mla_golden.sweeper.regions import Region, condition, listed, natural
from mla_golden.sweeper.rules import Condition


def test_a_value_that_names_its_axis_is_shown_alone() -> None:
    assert condition("causal", "noncausal") == "noncausal"  # not "causal noncausal"
    assert condition("sparse", "topk 64") == "topk 64"
    assert condition("heads", "32") == "heads 32" and condition("env", "none") == "env none"
    assert str(Condition("causal", "==", "causal")) == "causal"
    assert str(Condition("batch", ">=", "64")) == "batch >= 64"
    region = Region(where={"causal": "noncausal", "qlen": "3", "heads": "32"})
    assert region.scope() == "heads 32 x qlen 3 x noncausal"


def test_an_env_of_two_variables_is_never_read_as_two_values() -> None:
    assert listed(["16", "64", "128"]) == "16, 64, 128"
    env = ["none", "AITER_ENABLE_EXPERIMENTAL=1,AITER_MLA_META_USE_PARALLEL=0", "AITER_MLA_META_USE_PARALLEL=0"]
    assert listed(env) == "none | AITER_ENABLE_EXPERIMENTAL=1,AITER_MLA_META_USE_PARALLEL=0 | AITER_MLA_META_USE_PARALLEL=0"
    assert listed(env).split(" | ") == env


def test_values_sort_as_numbers_and_one_batch_size_reads_as_one() -> None:
    assert sorted(["2", "16", "1", "4"], key=natural) == ["1", "2", "4", "16"]
    assert sorted(["topk 2048", "dense", "topk 64"], key=natural) == ["dense", "topk 64", "topk 2048"]
    one = Region(where={"qlen": "3"}, cases=1, diverged=1, batches=[163], all_batches=[163])
    assert one.describe() == "diverges for qlen 3: 1 of 1 cases, at every batch (163)"
    some = Region(where={"qlen": "3"}, cases=3, diverged=2, batches=[5, 9], all_batches=[1, 5, 9])
    assert some.describe() == "diverges for qlen 3: 2 of 3 cases, at batch 5..9 only"
