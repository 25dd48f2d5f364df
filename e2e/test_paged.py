"""The served app on the paged labs: the block tables step forward and the pool grid changes;
the sharing view shows the prompt's blocks held by every answer (reference count above one)."""
from urllib.parse import parse_qs, urlparse

from conftest import plain_text, wait_ready


def column(page, source: str, key: str) -> list:
    """One column of a named ColumnDataSource, read from the Bokeh document in the page."""
    return page.evaluate(f"() => Array.from(Bokeh.documents[0].get_model_by_name('{source}').data['{key}'])")


def step_in_url(page) -> str:
    return parse_qs(urlparse(page.url).query).get("step", [""])[0]


def test_block_tables_step_forward_changes_the_grid(page, served_app):
    page.goto(f"{served_app}?lab=block-tables")
    wait_ready(page)
    step_text = plain_text(page, "kv-paged-step")
    step_text.filter(has_text="step 0 (prefill)").wait_for()
    before = column(page, "paged-physical", "ref_count")
    # prefill: 20 tokens in blocks 0-2, 24 tokens in blocks 3-5; 6 of 12 held
    assert before == [1] * 6 + [0] * 6
    page.locator(".kv-player .next").click()
    step_text.filter(has_text="step 1 (decode)").wait_for()
    after = column(page, "paged-physical", "ref_count")
    assert after == [1] * 7 + [0] * 5  # request 1's 25th token took block 6
    assert "seq 1 takes block 6" in step_text.inner_text()
    assert column(page, "paged-marks", "tag") == ["new"]
    page.wait_for_function("() => location.search.includes('step=1')")
    assert step_in_url(page) == "1"


def test_sharing_view_shows_the_prompt_blocks_shared(page, served_app):
    page.goto(f"{served_app}?lab=parallel-sampling&n=4&prompt_len=20&block_size=8")
    wait_ready(page)
    plain_text(page, "kv-sharing-step").filter(has_text="step 0").wait_for()
    counts = dict(zip(column(page, "sharing-physical", "block"), column(page, "sharing-physical", "ref_count")))
    # after the prefill and the forks, the prompt's 3 blocks are held by all 4 answers
    assert [counts[b] for b in (0, 1, 2)] == [4, 4, 4]
    assert "x4" in " ".join(column(page, "sharing-physical", "label"))
    summary = plain_text(page, "kv-sharing-summary").inner_text()
    assert "10" in summary and "16" in summary and "3 copies" in summary
    page.locator(".kv-player .next").click()
    plain_text(page, "kv-sharing-step").filter(has_text="copy-on-write").wait_for()
    assert column(page, "sharing-marks", "tag").count("CoW copy") == 3


def test_bad_input_gives_a_plain_message_and_defaults(page, served_app):
    page.goto(f"{served_app}?lab=parallel-sampling&n=0&seed=-1&block_size=8")
    wait_ready(page)
    message = plain_text(page, "kv-message")
    message.wait_for()
    text = message.inner_text()
    assert "n: '0' is not allowed; expected an integer from 1 to 16" in text
    assert "seed: '-1' is not allowed" in text
    page.goto(f"{served_app}?lab=block-tables&num_blocks=8")
    wait_ready(page)
    message.filter(has_text="num_blocks: 8 blocks of 8 tokens cannot hold both requests").wait_for()
    assert column(page, "paged-physical", "block") == list(range(12))  # the defaults ran
