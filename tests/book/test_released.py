"""posenc.book.released: chapter 4's table of released models, read by posenc's config inspector."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from posenc.book.released import RELEASED, released_rope_rows, rope_table_text  # noqa: E402


@pytest.fixture(scope="module")
def rows():
    return {(r["model"], r["layer_type"]): r for r in released_rope_rows()}


def test_every_model_has_a_row(rows):
    assert {m for m, _ in rows} == {name for name, *_ in RELEASED}


def test_the_rows_state_what_the_chapter_says(rows):
    assert rows["Gemma 3", "full_attention"]["scaling"] == "linear x8"
    assert rows["Gemma 3", "sliding_attention"]["scaling"] == "none"
    assert (rows["Gemma 3", "full_attention"]["base"], rows["Gemma 3", "sliding_attention"]["base"]) == (1e6, 1e4)
    g4 = rows["Gemma 4", "full_attention"]
    assert (g4["rotated_pairs"], g4["head_dim"], g4["scaling"]) == (64, 512, "proportional 0.25")
    ds = rows["DeepSeek-V3", "full_attention"]
    assert (ds["layout"], ds["scaling"], ds["rotary_dim"], ds["rotary_offset"]) == ("interleaved", "yarn x40", 64, 128)
    assert rows["Command A", "sliding_attention"]["layout"] == "interleaved"
    assert rows["Command A", "sliding_attention"]["nope"] == "10 of 40"
    assert rows["SmolLM3", "full_attention"]["nope"] == "9 of 36" and rows["Llama 4 Scout", "chunked_attention"]["nope"] == "12 of 48"
    scout, maverick = rows["Llama 4 Scout", "chunked_attention"], rows["Llama 4 Maverick", "chunked_attention"]
    assert (scout["scaling"], scout["trained_length"], scout["reach"]) == ("llama3 x16", 8192, 16 * 8192)
    assert maverick["scaling"] == "none"
    assert rows["Llama 3.1", "full_attention"]["reach"] == pytest.approx(8 * 8192)
    assert rows["gpt-oss", "sliding_attention"]["scaling"] == rows["gpt-oss", "full_attention"]["scaling"] == "yarn x32"
    assert rows["Qwen3-VL", "full_attention"]["sections"] == "[24, 20, 20] interleaved"
    assert rows["Qwen3-VL", "full_attention"]["layout"] == "half"


def test_table_text_has_a_line_per_row(rows):
    text = rope_table_text(list(rows.values()))
    assert len(text.splitlines()) == len(rows) + 1 and "Gemma 3" in text and "linear x8" in text
