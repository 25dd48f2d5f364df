"""The served app on the paged labs: each opens on a frame that shows its mechanism (a block
taken at decode, a copy-on-write, a freed beam), the blocks hold the request's characters,
the player steps with buttons and keys and says the step the URL holds, and nothing is wider
than a phone's screen."""

from urllib.parse import parse_qs, urlparse

import pytest

from conftest import plain_text, set_param, wait_ready


def column(page, source: str, key: str) -> list:
    """One column of a named ColumnDataSource, read from the Bokeh document in the page."""
    return page.evaluate(f"() => Array.from(Bokeh.documents[0].get_model_by_name('{source}').data['{key}'])")


def step_in_url(page) -> str:
    return parse_qs(urlparse(page.url).query).get("step", [""])[0]


def readout(page) -> str:
    return page.locator(".kv-player .kv-step-readout").inner_text()


def test_block_tables_step_forward_changes_the_grid(page, served_app):
    page.goto(f"{served_app}?lab=block-tables&shuffle=false&step=0")
    wait_ready(page)
    step_text = plain_text(page, "kv-paged-step")
    step_text.filter(has_text="step 0 (prefill)").wait_for()
    assert readout(page) == "step 0 of 12"
    before = column(page, "paged-physical", "ref_count")
    # prefill: 20 tokens in blocks 0-2, 24 tokens in blocks 3-5; 6 of 12 held
    assert before == [1] * 6 + [0] * 6
    # the blocks hold the prompts' characters: "The quick brown fox " is 8 + 8 + 4
    assert column(page, "paged-physical", "text")[:3] == ["The quic", "k brown ", "fox "]
    assert column(page, "paged-logical", "chars")[:3] == ["The\u00b7quic", "k\u00b7brown\u00b7", "fox\u00b7"]
    page.locator(".kv-player button.next").click()
    step_text.filter(has_text="step 1 (decode)").wait_for()
    after = column(page, "paged-physical", "ref_count")
    assert after == [1] * 7 + [0] * 5  # request 1's 25th token took block 6
    assert "seq 1 takes block 6" in step_text.inner_text()
    assert column(page, "paged-marks", "tag") == ["new"]
    page.wait_for_function("() => location.search.includes('step=1')")
    assert step_in_url(page) == "1" and readout(page) == "step 1 of 12"


def test_keys_step_and_play_and_a_parameter_change_keeps_the_step(page, served_app):
    page.goto(f"{served_app}?lab=block-tables&step=3")
    wait_ready(page)
    page.locator("body").click(position={"x": 5, "y": 400})  # nothing focused
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => location.search.includes('step=4')")
    assert readout(page) == "step 4 of 12"
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    page.wait_for_function("() => location.search.includes('step=2')")
    box = page.locator(".kv-param-prompt_a input").first
    box.focus()
    box.press("ArrowRight")  # in a text box the arrows are the box's
    page.wait_for_timeout(500)
    assert step_in_url(page) == "2"
    set_param(page, "decode_steps", "14")  # a longer trace: the step stays
    page.wait_for_function("() => location.search.includes('decode_steps=14')")
    wait_ready(page)
    assert step_in_url(page) == "2" and readout(page) == "step 2 of 14"
    page.locator("body").click(position={"x": 5, "y": 400})
    page.keyboard.press(" ")  # play to the end
    page.wait_for_function("() => location.search.includes('step=14')", timeout=20_000)
    assert readout(page) == "step 14 of 14"


def test_block_tables_opens_on_a_decode_step_with_scattered_blocks(page, served_app):
    page.goto(f"{served_app}?lab=block-tables")
    wait_ready(page)
    page.wait_for_function("() => location.search.includes('step=1')")  # request 1 takes a block
    assert "new" in column(page, "paged-marks", "tag")
    tables = {}
    for seq, block in zip(column(page, "paged-logical", "seq"), column(page, "paged-logical", "block")):
        tables.setdefault(seq, []).append(block)
    assert tables[0] != sorted(tables[0]) or tables[1] != sorted(tables[1])  # shuffled by default
    text = dict(zip(column(page, "paged-physical", "block"), column(page, "paged-physical", "text")))
    assert "".join(text[b] for b in tables[0]).startswith("The quick brown fox ")


def test_sharing_view_opens_on_copy_on_write_beside_the_shared_prompt(page, served_app):
    page.goto(f"{served_app}?lab=parallel-sampling&n=4&prompt_len=20&block_size=8")
    wait_ready(page)
    page.wait_for_function("() => location.search.includes('step=1')")
    counts = dict(zip(column(page, "sharing-physical", "block"), column(page, "sharing-physical", "ref_count")))
    # the prompt's 2 full blocks are held by all 4 answers; its partly filled block was copied 3 times
    assert sorted(counts.values()).count(4) == 2
    assert column(page, "sharing-marks", "tag").count("CoW copy") == 3
    text = dict(zip(column(page, "sharing-physical", "block"), column(page, "sharing-physical", "text")))
    assert sorted(t[:4] for t in text.values()).count("fox ") == 4  # "fox " and each answer's first character
    summary = plain_text(page, "kv-sharing-summary").inner_text()
    assert "10" in summary and "16" in summary and "3 copies" in summary
    page.locator(".kv-player button.previous").click()
    plain_text(page, "kv-sharing-step").filter(has_text="step 0").wait_for()
    assert [counts for counts in column(page, "sharing-physical", "ref_count") if counts].count(4) == 3


def test_beam_search_opens_on_its_tree_with_a_freed_beam(page, served_app):
    page.goto(f"{served_app}?lab=beam-search")
    wait_ready(page)
    page.wait_for_function("() => location.search.includes('step=2')")
    assert max(column(page, "sharing-physical", "ref_count")) > 1  # the prompt's blocks, shared
    fates = column(page, "beam-nodes", "fate")
    assert "freed" in fates and fates.count("final") == 4
    assert "fork" in column(page, "beam-edges", "kind")
    notes = [n for n in column(page, "beam-nodes", "note") if n]
    assert len(notes) == 4 and all("(x" in n for n in notes)  # this step's beams, with their shared blocks


@pytest.mark.parametrize("lab", ["block-tables", "parallel-sampling", "beam-search", "paged-equivalence"])
def test_nothing_is_wider_than_a_phone(browser, served_app, lab):
    page = browser.new_page(viewport={"width": 390, "height": 844})
    try:
        page.goto(f"{served_app}?lab={lab}")
        wait_ready(page)
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    finally:
        page.close()


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
