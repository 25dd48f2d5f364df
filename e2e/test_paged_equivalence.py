"""The served app on the paged-equivalence lab: every configuration is drawn green, the
contiguous cache included (its bar is its peak K/V rows, as long as block size 1's), and a new
block size adds its two rows (in order and shuffled)."""

from conftest import plain_text, wait_ready


def labels(page) -> list:
    return page.evaluate("() => Array.from(Bokeh.documents[0].get_model_by_name('equivalence-runs').data['label'])")


def colors(page) -> list:
    return page.evaluate("() => Array.from(Bokeh.documents[0].get_model_by_name('equivalence-runs').data['color'])")


def test_every_configuration_is_identical_and_block_size_adds_rows(page, served_app):
    page.goto(f"{served_app}?lab=paged-equivalence&requests=3&block_size=8")
    wait_ready(page)
    plain_text(page, "kv-equivalence-verdict").filter(has_text="identical in every configuration: yes").wait_for()
    # contiguous + block sizes {1, 4, 8, 16} x (in order, shuffled) = 9 runs
    assert len(labels(page)) == 9 and set(colors(page)) == {"#2ca02c"}
    peaks = dict(
        zip(
            labels(page),
            page.evaluate("() => Array.from(Bokeh.documents[0].get_model_by_name('equivalence-runs').data['peak'])"),
        )
    )
    assert peaks["contiguous"] > 0 and peaks["contiguous"] == peaks["paged, block 1, in order"]
    assert all(peak >= peaks["contiguous"] for peak in peaks.values())
    handle = page.locator(".kv-param-block_size .noUi-handle").first
    handle.focus()
    handle.press("ArrowRight")  # the slider's step: block size 8 -> 9
    page.wait_for_function("() => location.search.includes('block_size=9')")
    page.wait_for_function(
        "() => Bokeh.documents[0].get_model_by_name('equivalence-runs').data['label'].includes('paged, block 9, shuffled')"
    )
    assert len(labels(page)) == 9 and "paged, block 8, in order" not in labels(page)
    assert set(colors(page)) == {"#2ca02c"}
