"""mla_golden/reference/aiter_tags.json (release tag -> planner version) and planner_digests.json are well-formed data.

The files are written by tools/aiter_oracle/tags.py from the aiter mirror and read
by the product (`mla-golden versions`, version names by tag, `versions --aiter`),
so their schema is checked here rather than trusted.
"""

from __future__ import annotations

import datetime
import json
import re
from importlib import resources
from typing import Any

import pytest

from mla_golden.reference import versions
from mla_golden.reference.planner_digest import NORMALISATION

SUPPORTED = {v.name for v in versions()}
KEYS = {"tag", "commit", "date", "planner_digest", "same_planner_as"}


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    text = resources.files("mla_golden.reference").joinpath("aiter_tags.json").read_text(encoding="utf-8")
    data = json.loads(text)
    assert isinstance(data, list) and data, "aiter_tags.json must be a non-empty JSON list"
    return data


def test_every_row_has_exactly_the_schema_keys_and_types(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        assert isinstance(row, dict), row
        assert set(row) == KEYS, row
        assert re.fullmatch(r"v\d+\.\d+\S*", row["tag"]), row
        assert re.fullmatch(r"[0-9a-f]{40}", row["commit"]), row
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", row["date"]), row
        datetime.date.fromisoformat(row["date"])
        assert re.fullmatch(r"[0-9a-f]{64}", row["planner_digest"]), row
        assert row["same_planner_as"] is None or row["same_planner_as"] in SUPPORTED, row


def test_tags_are_unique_and_sorted_by_date(rows: list[dict[str, Any]]) -> None:
    tags = [r["tag"] for r in rows]
    assert len(tags) == len(set(tags))
    dates = [r["date"] for r in rows]
    assert dates == sorted(dates)


def test_a_supported_version_is_one_digest_and_a_digest_one_version(rows: list[dict[str, Any]]) -> None:
    digest_of: dict[str, str] = {}
    version_of: dict[str, str | None] = {}
    for row in rows:
        version, digest = row["same_planner_as"], row["planner_digest"]
        if version is not None:
            assert digest_of.setdefault(version, digest) == digest, row
        assert version_of.setdefault(digest, version) == version, row
        if row["commit"].startswith(tuple(SUPPORTED)):
            assert version is not None and row["commit"].startswith(version), row


@pytest.mark.parametrize(
    ("tag", "version"),
    [
        ("v0.1.16.post2", "62028796"),
        ("v0.1.17-longctx", "aded0f84"),  # these three differ from aded0f84 only in annotations,
        ("v0.1.18", "aded0f84"),  # int(math.ceil(..)) and a `...` line: the same by meaning
        ("v0.1.19", "aded0f84"),
        ("v0.1.20", "e4048607"),
        ("v0.1.20.post1", "e4048607"),
    ],
)
def test_known_releases_map_to_their_planner(rows: list[dict[str, Any]], tag: str, version: str) -> None:
    row = next(r for r in rows if r["tag"] == tag)
    assert row["same_planner_as"] == version


def test_every_ported_version_has_its_digest_and_its_tags_share_it(rows: list[dict[str, Any]]) -> None:
    text = resources.files("mla_golden.reference").joinpath("planner_digests.json").read_text(encoding="utf-8")
    data = json.loads(text)
    assert data["normalisation"] == NORMALISATION
    digests = data["versions"]
    assert set(digests) == {v.commit for v in versions()}
    for row in rows:
        if row["same_planner_as"] is not None:
            commit = next(v.commit for v in versions() if v.name == row["same_planner_as"])
            assert row["planner_digest"] == digests[commit], row
