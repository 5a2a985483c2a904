"""The two-commit comparison (benchmarks/compare_commits.py): an earlier commit's library
imported beside this tree's, and one case timed (the full run is a benchmark)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

_BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
_spec = importlib.util.spec_from_file_location(
    "compare_commits", _BENCHMARKS / "compare_commits.py"
)
compare_commits = importlib.util.module_from_spec(_spec)
sys.modules["compare_commits"] = compare_commits
_spec.loader.exec_module(compare_commits)

import attention_lib  # noqa: E402
from attention_course.bench.ratios import RatioCase  # noqa: E402


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """The library as committed at HEAD, taken out of git and imported under its own name."""
    folder = tmp_path_factory.mktemp("commit")
    return compare_commits.import_at(compare_commits.commit_of("HEAD"), folder)


def test_the_earlier_commit_is_a_library_of_its_own_that_computes_the_same(base):
    assert base.__name__.startswith("attention_lib_") and base is not attention_lib
    assert base.flash_attention is not attention_lib.flash_attention
    assert Path(base.__file__).parent.name == base.__name__  # from git, not this tree
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 33, 8, generator=generator) for _ in range(3))
    ours = attention_lib.flash_attention(q, k, v, backend="tiled", is_causal=True)
    theirs = base.flash_attention(q, k, v, backend="tiled", is_causal=True)
    torch.testing.assert_close(theirs, ours)


def test_a_case_gives_both_ratios_to_sdpa_and_the_change_per_round(base):
    case = RatioCase(length=64, width=16, causal=True, backward=True)
    (row,) = compare_commits.compare([case], base, rounds=4)
    assert row["base_ratio"] == pytest.approx(row["sdpa_s"] / row["base_s"])
    assert row["head_ratio"] == pytest.approx(row["sdpa_s"] / row["head_s"])
    low, high = row["head_over_base_iqr"]
    assert 0 < low <= row["head_over_base"] <= high
    assert "L=   64 E= 16 fwd+bwd causal=True" in compare_commits.format_row(row)


def test_an_unknown_revision_is_refused_by_name():
    with pytest.raises(SystemExit, match="'no-such-revision' is not a commit of this repository"):
        compare_commits.commit_of("no-such-revision")


def test_fewer_than_two_rounds_are_refused(capsys):
    with pytest.raises(SystemExit):
        compare_commits.main(["HEAD", "--rounds", "1"])
    assert "--rounds 1: at least 2" in capsys.readouterr().err
