"""The sweep space: the shipped one spans the default matrix; small spaces enumerate, large ones sample by seed."""

from __future__ import annotations

import itertools
import re
import textwrap

import pytest

from mla_golden.errors import SpaceError
from mla_golden.matrix import load_matrix
from mla_golden.sweeper.axes import IntRange
from mla_golden.sweeper.space import DECODE, PREFILL, Point, load_space, parse

SMALL = """\
format = "mla-golden-space/1"
devices = ["gfx942:304"]

[[decode]]
name = "small"
heads = [16, 128]
dtype = ["fp8", "bf16/fp8"]
qlen = "1..2"
batch = 3
context = "jitter:300"
env = { AITER_MLA_META_USE_PARALLEL = ["unset", "0"] }

[[prefill]]
name = "p"
heads = 16
seq_lens = [[300, 7], [5]]
"""


def test_small_space_is_enumerated_whole_in_order() -> None:
    space = parse(SMALL)
    assert space.size() == 2 * 2 * 2 * 2 + 2
    points = list(space.points(seed=0, limit=100))
    assert len(points) == 18 and len({p.key for p in points}) == 18
    decode = [p for p in points if p.op == DECODE]
    assert {(p.q_dtype, p.kv_dtype) for p in decode} == {("fp8", "fp8"), ("bf16", "fp8")}
    assert {p.qlen for p in decode} == {1, 2} and {p.batch for p in decode} == {3}
    assert {dict(p.env).get("AITER_MLA_META_USE_PARALLEL") for p in decode} == {None, "0"}
    assert all(p.max_split_per_batch == (32 if p.heads == 128 else -1) for p in decode), "vLLM: min(ceil(304 / 3), 32) at 128 heads"
    assert [p.seq_lens for p in points if p.op == PREFILL] == [(300, 7), (5,)]
    assert list(space.points(seed=5, limit=100)) == points, "enumeration does not depend on the seed"


def test_large_space_samples_by_seed_and_index() -> None:
    space = load_space()
    first = list(itertools.islice(space.points(seed=1, limit=500), 200))
    assert list(itertools.islice(space.points(seed=1, limit=500), 200)) == first, "same seed, same points"
    assert list(itertools.islice(space.points(seed=2, limit=500), 200)) != first
    batches = [p.batch for p in first if p.op == DECODE]
    assert min(batches) < 8 and max(batches) > 128, "log-uniform over 1..512 reaches both ends"
    assert {p.op for p in first} == {DECODE, PREFILL}


def test_shipped_space_spans_the_shipped_matrix() -> None:
    space = load_space()
    points = list(itertools.islice(space.points(seed=0, limit=500), 3000))
    for case in load_matrix():
        if case.op == DECODE:
            assert any(
                p.op == DECODE and (p.arch, p.cu_num, p.heads, p.q_dtype, p.qlen, p.page_size) ==
                (case.arch, case.cu_num, case.kernel_heads, case.dtype, case.qlen, case.page_size)
                for p in points
            ), case.name  # fmt: skip
        else:
            assert any(p.op == PREFILL and (p.arch, p.heads) == (case.arch, case.heads) for p in points), case.name
    decode = [p for p in points if p.op == DECODE]
    assert max(max(p.seq_lens) for p in decode) > 100_000 and max(p.batch for p in decode) > 400
    assert {dict(p.env).get("AITER_ENABLE_EXPERIMENTAL") for p in decode} == {None, "1"}
    assert any(p.max_split_per_batch > 0 for p in decode) and any(p.max_split_per_batch == -1 for p in decode)


def test_int_ranges_sample_inside_their_bounds() -> None:
    import random

    rng = random.Random(0)
    values = [IntRange(3, 9).sample(rng) for _ in range(500)]
    assert min(values) == 3 and max(values) == 9


def test_point_round_trips_through_json_and_keys_are_stable() -> None:
    point = next(iter(parse(SMALL).points(0, 100)))
    assert Point.from_dict(point.to_dict()) == point
    assert point.key == Point.from_dict(point.to_dict()).key
    assert point.key.startswith("sweep/decode/gfx942-cu304/h16-fp8-q1-")


@pytest.mark.parametrize(
    ("change", "line", "problem"),
    [
        ('qlen = "1..2"', 'qlen = "2..1"', "key 'qlen': range '2..1' must lie within"),
        ('dtype = ["fp8", "bf16/fp8"]', 'dtype = ["fp9"]', "key 'dtype': expected Q or Q/KV dtypes"),
        ('context = "jitter:300"', 'context = "zigzag:300"', "key 'context': expected 'uniform:N'"),
        ("env = { AITER_MLA_META_USE_PARALLEL", "env = { AITER_NOPE", "key 'env.AITER_NOPE': not a planner env var"),
        ("heads = [16, 128]", "heads = [12]", "12 heads per rank"),
        ("batch = 3", "bacth = 3", "key 'bacth': unknown key"),
    ],
)
def test_bad_space_names_file_line_and_key(change: str, line: str, problem: str) -> None:
    text = SMALL.replace(change, line)
    with pytest.raises(SpaceError) as info:
        parse(text, "space.toml")
    message = str(info.value)
    assert problem in message and message.startswith("space.toml:"), message
    number = int(message.split(":")[1])
    assert line.split("=")[0].strip() in text.splitlines()[number - 1] or "[[decode]]" in text.splitlines()[number - 1]


def test_space_without_groups_or_with_unknown_format_is_refused() -> None:
    with pytest.raises(SpaceError, match="nothing to sweep"):
        parse('format = "mla-golden-space/1"\n', "empty.toml")
    with pytest.raises(SpaceError, match="unknown format"):
        parse(textwrap.dedent(SMALL).replace("mla-golden-space/1", "mla-golden-space/9"), "x.toml")


WHOLE = """\
format = "mla-golden-space/1"
devices = ["gfx950:256"]

[[decode]]
name = "sparse"
heads = 128
dtype = "fp8"
qlen = 2
batch = 2
context = "uniform:5000"
topk = [-1, 2048]

[[prefill]]
name = "p"
heads = 16
seq_lens = [[700, 33]]
causal = [true, false]
qlen_granularity = [256, 128]
kvlen_granularity = 64
block_size = [1, 16]
"""


def test_prefill_sweeps_causality_and_its_tile_settings_and_decode_its_topk() -> None:
    from mla_golden.sweeper.evaluate import run_side, template
    from mla_golden.sweeper.planners import resolve_planner

    points = list(parse(WHOLE).points(0, 100))
    prefill = [p for p in points if p.op == PREFILL]
    assert {(p.causal, p.qlen_granularity, p.block_size) for p in prefill} == set(itertools.product([True, False], [256, 128], [1, 16]))
    assert {p.kvlen_granularity for p in prefill} == {64} and {p.gqa_ratio for p in prefill} == {1}
    reference = resolve_planner("reference")
    noncausal = next(p for p in prefill if not p.causal and p.qlen_granularity == 128 and p.block_size == 16)
    call, sizing = template(noncausal, reference)
    assert call.params["is_causal"] is False and call.params["qlen_granularity"] == 128 and call.params["block_size"] == 16
    assert sizing["qlen_granularity"] == 128 and call.inputs["pages_kv_indptr"].tolist() == [0, 44, 47], "pages of 16 tokens"
    assert "-noncausal-q128-kv64-h1-b16-g1-" in noncausal.key
    dense, sparse = sorted((p for p in points if p.op == DECODE), key=lambda p: p.topk)
    assert (dense.topk, sparse.topk) == (-1, 2048) and "-topk2048-" in sparse.key
    call, sizing = template(sparse, reference)
    assert call.params["topk"] == 2048 and sizing["is_sparse"] is True
    assert run_side(sparse, reference).shapes != run_side(dense, reference).shapes, "sized as sparse: a batch per token"


def test_a_python_point_of_a_setting_its_op_cannot_say_is_refused_not_run_as_another() -> None:
    from mla_golden.sweeper.space import Space

    Space.of([Point(PREFILL, "gfx950", 256, 16, (300,), causal=False, qlen_granularity=128)])  # prefill says both
    for point, problem in [
        (Point(PREFILL, "gfx950", 256, 16, (300,), qlen=2), "get_ps_metadata_v1 has no qlen=2 (decode settings)"),
        (Point(PREFILL, "gfx950", 256, 16, (300,), page_size=16, topk=8), "has no page_size=16, topk=8"),
        (Point(DECODE, "gfx950", 256, 16, (300,), block_size=16), "get_mla_metadata_v1 has no block_size=16"),
        (Point(DECODE, "gfx950", 256, 16, (2,), qlen=3), "shorter than its query length 3"),
        (Point(DECODE, "gfx950", 256, 16, ()), "expected at least one request"),
    ]:
        with pytest.raises(SpaceError, match=re.escape("<points>: point 1: ") + f".*{re.escape(problem)}"):
            Space.of([Point(DECODE, "gfx950", 256, 16, (300,)), point])


def test_a_noncausal_prefill_point_runs_noncausal() -> None:
    import mla_golden

    point = Point(PREFILL, "gfx950", 256, 16, (700,), causal=False)
    findings = mla_golden.sweep("reference", "python:helpers.planted_planners:causal_prefill", [point, Point(PREFILL, "gfx950", 256, 16, (700,))])
    assert [r.status for r in findings.results] == ["diverged", "equal"], "the plug-in plans every prefill as causal"
