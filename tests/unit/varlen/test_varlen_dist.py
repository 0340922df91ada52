"""Length distributions: every file format, the example mixes, and every bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from autopar.errors import SpecError
from autopar.io.distributions import load_distribution
from autopar.varlen import check_max

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "seqlen"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_text_file_with_comments_and_blank_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "lens.txt", "# lengths of my SFT set\n100\n\n  300  # trailing comment\n200\n")
    dist = load_distribution(path)
    assert (dist.min_len, dist.max_len, dist.mean_len) == (100, 300, 200.0)
    draws = dist.sample(3000, np.random.default_rng(1))
    assert draws.dtype == np.int64
    assert set(np.unique(draws)) == {100, 200, 300}
    assert abs(draws.mean() - 200.0) < 6.0


@pytest.mark.parametrize("field", ["length", "len", "seq_len", "num_tokens"])
def test_jsonl_length_fields(tmp_path: Path, field: str) -> None:
    lines = [json.dumps({"id": i, field: n}) for i, n in enumerate((10, 20, 60))]
    dist = load_distribution(write(tmp_path, "index.jsonl", "\n".join(lines) + "\n\n"))
    assert (dist.max_len, dist.mean_len) == (60, 30.0)


def test_npy_and_shapes(tmp_path: Path) -> None:
    path = tmp_path / "lens.npy"
    np.save(path, np.array([5, 7, 9], dtype=np.int32))
    dist = load_distribution(path)
    assert (dist.max_len, dist.mean_len) == (9, 7.0)
    assert dist.sample((4, 5), np.random.default_rng(0)).shape == (4, 5)


def test_histogram_samples_uniformly_inside_bins(tmp_path: Path) -> None:
    path = write(tmp_path, "h.yaml", "bin_edges: [1, 11, 101]\ncounts: [3, 1]\n")
    dist = load_distribution(path)
    assert (dist.min_len, dist.max_len) == (1, 100)
    assert dist.mean_len == pytest.approx(0.75 * 5.5 + 0.25 * 55.5)  # integers 1..10 and 11..100
    draws = dist.sample(200_000, np.random.default_rng(2))
    assert draws.min() == 1 and draws.max() == 100
    assert (draws <= 10).mean() == pytest.approx(0.75, abs=0.005)
    assert np.bincount(draws[draws <= 10])[1:].min() > 0.07 * 0.75 * 200_000  # every integer of bin 1
    assert draws.mean() == pytest.approx(dist.mean_len, rel=0.01)


def test_large_histogram_draws_are_the_plain_inverse_cdf_draws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Block by block (two streams read side by side) gives the very numbers of one whole draw, and the same state."""
    import autopar.spec.distribution as dist_module

    path = write(tmp_path, "h.yaml", "bin_edges: [1, 512, 4096, 131073]\ncounts: [5, 3, 1]\n")
    dist = load_distribution(path)
    shape = (3, dist_module.SAMPLE_BLOCK + 1234)  # more than one block, the last one partial

    def draw(rng: np.random.Generator) -> list[np.ndarray]:
        rng.integers(0, 10, dtype=np.uint32)  # leaves half a 64-bit word buffered in the generator
        return [dist.sample(shape, rng), dist.sample(7, rng), rng.integers(0, 1 << 30, 5, dtype=np.uint32), rng.random(3)]

    blocked = draw(np.random.default_rng(11))
    monkeypatch.setattr(dist_module, "SAMPLE_BLOCK", 1 << 40)  # one whole draw
    whole = draw(np.random.default_rng(11))
    for got, want in zip(blocked, whole, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape and (got == want).all()
    # the edge-counting bins are searchsorted's
    cdf = np.cumsum(dist.components[0].probs)
    u = np.random.default_rng(3).random(10_000)
    assert (dist_module._bins(cdf, u.copy()) == np.minimum(np.searchsorted(cdf, u * cdf[-1], side="right"), 2)).all()


def test_lognormal_clipped_mean_median_and_bounds(tmp_path: Path) -> None:
    path = write(tmp_path, "ln.yaml", "lognormal: {median: 1000, sigma: 1.0, min: 50, max: 8000}\n")
    dist = load_distribution(path)
    assert (dist.min_len, dist.max_len) == (50, 8000)
    draws = dist.sample(400_000, np.random.default_rng(3))
    assert draws.min() == 50 and draws.max() == 8000
    assert np.median(draws) == pytest.approx(1000, rel=0.01)
    assert draws.mean() == pytest.approx(dist.mean_len, rel=0.005)
    # the clip piles up at the bounds: P(X > 8000) = 1 - Phi(ln 8)
    assert (draws == 8000).mean() == pytest.approx(0.5 * math.erfc(math.log(8) / math.sqrt(2)), abs=0.002)


def test_mixture_weights(tmp_path: Path) -> None:
    text = (
        "name: mix\nsource: test\nmixture:\n"
        "  - {weight: 3, bin_edges: [100, 101], counts: [1]}\n"
        "  - {weight: 1, lognormal: {median: 5000, sigma: 0.1, max: 6000}}\n"
    )
    dist = load_distribution(write(tmp_path, "m.yml", text))
    assert dist.name == "mix" and dist.max_len == 6000
    draws = dist.sample(100_000, np.random.default_rng(4))
    assert (draws == 100).mean() == pytest.approx(0.75, abs=0.006)


def test_examples_match_their_documented_shape() -> None:
    chat = load_distribution(EXAMPLES / "chat_short.yaml")
    assert chat.max_len == 16384 and chat.mean_len == pytest.approx(1197, abs=2)
    long = load_distribution(EXAMPLES / "long_context.yaml")
    assert long.max_len == 131072 and long.mean_len == pytest.approx(5131, abs=1)
    draws = long.sample(1_000_000, np.random.default_rng(5))
    assert (draws < 4096).mean() == pytest.approx(0.80, abs=0.002)  # ByteScale's 80% of samples <= 4K
    share_long = draws[draws >= 32768].sum() / draws.sum()
    assert share_long == pytest.approx(0.40, abs=0.015)  # the comment's "about 40% of the tokens"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.txt", None, "missing.txt: file not found"),
        ("empty.txt", "", "empty.txt: file is empty"),
        ("comments.txt", "# nothing\n\n", "no lengths found"),
        ("words.txt", "100\n200\nabc\n", "words.txt:3: expected a positive integer length, got 'abc'"),
        ("float.txt", "100\n2.5\n", "float.txt:2: expected a positive integer length, got '2.5'"),
        ("zero.txt", "100\n0\n", "zero.txt:2: lengths must be positive, got 0"),
        ("neg.txt", "-5\n", "neg.txt:1: lengths must be positive, got -5"),
        ("bad.jsonl", '{"length": 5}\n{"length": 5', "bad.jsonl:2: malformed JSON"),
        ("two.jsonl", '{"len": 5, "length": 6}\n', "two.jsonl:1: expected exactly one of the fields"),
        ("none.jsonl", '{"tokens": 5}\n', "none.jsonl:1: expected exactly one of the fields length, len, seq_len, num_tokens; found none"),
        ("list.jsonl", "[5]\n", "list.jsonl:1: expected a JSON object"),
        ("negj.jsonl", '{"seq_len": -1}\n', "negj.jsonl:1: seq_len: lengths must be positive, got -1"),
        ("shape.yaml", "bin_edges: [1, 10, 20]\ncounts: [1]\n", "shape.yaml: counts: expected 2 counts for 3 bin edges, got 1"),
        ("order.yaml", "bin_edges: [1, 10, 10]\ncounts: [1, 1]\n", "order.yaml: bin_edges: must be strictly increasing"),
        ("zeros.yaml", "bin_edges: [1, 10]\ncounts: [0]\n", "zeros.yaml: counts: all counts are zero"),
        ("negc.yaml", "bin_edges: [1, 10, 20]\ncounts: [1, -2]\n", "negc.yaml: counts[1]: must be >= 0, got -2"),
        ("edge0.yaml", "bin_edges: [0, 10]\ncounts: [1]\n", "edge0.yaml: bin_edges[0]: must be >= 1, got 0"),
        (
            "unknown.yaml",
            "bin_edges: [1, 10]\ncounts: [1]\nbin_edge: 3\n",
            "unknown.yaml: bin_edge: unknown field (did you mean 'bin_edges'?)",
        ),
        ("nothing.yaml", "name: x\n", "nothing.yaml: bin_edges: missing"),
        ("lnmax.yaml", "lognormal: {median: 10, sigma: 1}\n", "lnmax.yaml: lognormal.max: missing required field"),
        ("lnkey.yaml", "lognormal: {median: 10, sigma: 1, max: 99, mu: 3}\n", "lnkey.yaml: lognormal.mu: unknown field"),
        (
            "lnmin.yaml",
            "lognormal: {median: 10, sigma: 1, max: 99, min: 100}\n",
            "lnmin.yaml: lognormal.min (100) must not exceed max (99)",
        ),
        ("lnsig.yaml", "lognormal: {median: 10, sigma: -1, max: 99}\n", "lnsig.yaml: lognormal.sigma: must be a positive number"),
        ("mix.yaml", "mixture: []\n", "mix.yaml: mixture: expected at least 1 item(s), got 0"),
        ("mixw.yaml", "mixture: [{bin_edges: [1, 2], counts: [1]}]\n", "mixw.yaml: mixture[0].weight: missing required field"),
        ("top.yaml", "- 1\n- 2\n", "top.yaml: expected a mapping of fields at the top level"),
    ],
)
def test_bad_files_name_the_file_and_place(tmp_path: Path, name: str, content: str | None, message: str) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_distribution(path)
    text = str(err.value)
    assert message in text
    assert "\n" not in text
    assert str(path) in text or name in text


def test_non_utf8_text(tmp_path: Path) -> None:
    path = tmp_path / "latin.txt"
    path.write_bytes(b"100\n\xff\xfe200\n")
    with pytest.raises(SpecError, match=r"latin.txt: not UTF-8 text \(bad byte at offset 4\)"):
        load_distribution(path)


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (np.array([1.0, 2.0]), "expected integer lengths, got dtype float64"),
        (np.array([[1, 2], [3, 4]]), "expected a one-dimensional array of lengths, got shape (2, 2)"),
        (np.array([], dtype=np.int64), "the array is empty"),
        (np.array([3, 0, 4]), "lengths must be positive; element 1 is 0"),
    ],
)
def test_bad_npy(tmp_path: Path, array: np.ndarray, message: str) -> None:
    path = tmp_path / "lens.npy"
    np.save(path, array)
    with pytest.raises(SpecError) as err:
        load_distribution(path)
    assert str(err.value) == f"{path}: {message}"


def test_npy_that_is_not_an_array(tmp_path: Path) -> None:
    path = tmp_path / "lens.npy"
    path.write_text("100\n200\n", encoding="utf-8")
    with pytest.raises(SpecError, match=r"not a readable \.npy array"):
        load_distribution(path)


def test_check_max_names_model_and_lengths(tmp_path: Path) -> None:
    dist = load_distribution(write(tmp_path, "l.txt", "4096\n200000\n"))
    check_max(dist, 200000, "m")  # exactly at the limit is fine
    with pytest.raises(SpecError) as err:
        check_max(dist, 131072, "llama3-70b")
    assert str(err.value) == (
        f"{tmp_path / 'l.txt'}: longest sequence (200000 tokens) exceeds llama3-70b's max_seq_len (131072); "
        "lower the distribution's max or pick a model with a longer context"
    )
