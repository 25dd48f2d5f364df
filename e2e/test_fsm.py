"""The served app end to end on the fsm lab: typing a pattern redraws the graph, a bad
pattern gives a message naming the position, hostile pattern text executes nothing."""

from urllib.parse import parse_qs, quote

from conftest import INJECTED, plain_text, table_rows, wait_ready, wait_until

from kvweb.labs.fsm import PRESETS


def type_pattern(page, text: str) -> None:
    """Type into the pattern box and commit it with Enter, as a user would."""
    box = page.locator(".kv-param-pattern input").first
    box.fill(text)
    box.press("Enter")


def states_drawn(page) -> int:
    """Points in the graph's state source, read from the Bokeh document in the page."""
    return page.evaluate("() => Bokeh.documents[0].get_model_by_name('fsm-states').data.x.length")


def outputs_drawn(page) -> list[str]:
    """The constrained outputs, as the results table shows them."""
    return [row[1] for row in table_rows(page, "kv-fsm-outputs")]


def query(page):
    return {k: v[0] for k, v in parse_qs(page.evaluate("location.search").lstrip("?")).items()}


def test_opens_on_a_jump_edge_and_the_graph_fits(page, served_app):
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{served_app}?lab=fsm&samples=1")
    wait_ready(page)
    assert query(page)["step"] == "0"
    # sample 0 writes "name is paged, age is 25, city is notatass.": 3 jumps, 5 + 2 + 8 sampled
    # characters, the forced '.' and the end: 20 steps
    assert (
        plain_text(page, "kv-fsm-step")
        .inner_text()
        .startswith("step 1/20: state 0 -> 8; jump edge: \u201cname is \u201d")
    )
    walked = page.evaluate("() => Bokeh.documents[0].get_model_by_name('fsm-active').data.x0.length")
    assert walked == 8  # the jump edge's chain, drawn lit: n a m e ␣ i s ␣
    fits = page.evaluate("""() => {
        const doc = Bokeh.documents[0], s = doc.get_model_by_name('fsm-states').data;
        const plot = [...doc.all_models].find(m => m.renderers && m.renderers.some(
            r => r.data_source && r.data_source.name === 'fsm-states'));
        const xs = Array.from(s.x), ys = Array.from(s.y);
        return xs.every(x => x > plot.x_range.start && x < plot.x_range.end)
            && ys.every(y => y > plot.y_range.start && y < plot.y_range.end);
    }""")
    assert fits  # every state inside the figure's ranges: nothing clipped
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")


def test_typing_a_pattern_redraws_the_graph(page, served_app):
    page.goto(f"{served_app}?lab=fsm&samples=1&step=3")
    wait_ready(page)
    summary = plain_text(page, "kv-fsm-summary")
    assert "47 states" in summary.inner_text() and states_drawn(page) == 47
    assert query(page)["step"] == "3"
    assert plain_text(page, "kv-fsm-step").inner_text().startswith("step 4/")
    type_pattern(page, "(yes|no)")
    summary.filter(has_text="5 states").wait_for()
    # start, after y, after ye, after n, accepted: 5 states, two chains ("es", "o")
    assert states_drawn(page) == 5 and "2 jump edges" in summary.inner_text()
    page.wait_for_function("() => location.search.includes('pattern=%28yes%7Cno%29')")
    assert wait_until(lambda: outputs_drawn(page) in (["yes"], ["no"]))


def test_bad_pattern_names_the_position_and_keeps_the_graph(page, served_app):
    page.goto(f"{served_app}?lab=fsm&samples=1&pattern=ab%7Bcd")
    wait_ready(page)
    message = plain_text(page, "kv-message")
    message.wait_for()
    assert "at position 2" in message.inner_text() and "using the defaults" in message.inner_text()
    type_pattern(page, "a(?=b)")
    message.filter(has_text="look-arounds").wait_for()
    assert states_drawn(page) == 47  # the last good result stays drawn


def test_hostile_pattern_text_executes_nothing(page, served_app, guard):
    hostile = "<img src=x onerror=alert(1)>"  # a valid pattern: its output is this text too
    page.goto(f"{served_app}?lab=fsm&samples=2&pattern={quote(hostile)}")
    wait_ready(page)
    shown = plain_text(page, "kv-fsm-pattern")
    assert hostile in shown.inner_text()
    assert "<img src=x onerror=alert1>" in " ".join(page.locator(".kv-fsm-outputs .slick-cell").all_inner_texts())
    assert query(page)["pattern"] == hostile
    type_pattern(page, "<script>alert(2)</script>")
    shown.filter(has_text="<script>alert(2)</script>").wait_for()
    wait_ready(page)
    assert page.evaluate(INJECTED) == []
    assert guard.dialogs == [] and guard.errors == []


def test_a_preset_disables_the_pattern_box_it_replaces(page, served_app):
    """A preset is decoded instead of the pattern: the box is disabled while the preset is used,
    so no box shows a pattern the run ignores; back to custom, it is the pattern in use again."""
    page.goto(f"{served_app}?lab=fsm&samples=1")
    wait_ready(page)
    box = page.locator(".kv-param-pattern input").first
    assert box.is_enabled()
    page.locator(".kv-param-preset select").select_option("ambiguous")
    page.wait_for_function("() => location.search.includes('preset=ambiguous')")
    wait_ready(page)
    assert wait_until(lambda: box.is_disabled())
    plain_text(page, "kv-fsm-pattern").filter(has_text=PRESETS["ambiguous"]).wait_for()  # the preset's run drawn
    page.locator(".kv-param-preset select").select_option("custom")
    page.wait_for_function("() => location.search.includes('preset=custom')")
    assert wait_until(lambda: box.is_enabled())


def test_patterns_that_once_stalled_the_server_compile_or_are_refused_at_once(page, served_app):
    """(a|b){0,2000} stalled other sessions for 26 s: it now compiles in a fraction of a second; a
    pattern whose compiling is over the budget is refused by its estimate, named, and the lab runs
    its default instead."""
    page.goto(f"{served_app}?lab=fsm&samples=1&pattern={quote('(a|b){0,2000}')}")
    wait_ready(page, timeout=30_000)
    assert "pattern in use: (a|b){0,2000}" in plain_text(page, "kv-fsm-pattern").inner_text()
    letters = "|".join("abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    page.goto(f"{served_app}?lab=fsm&pattern={quote('(.{0,30}(' + letters + ')){0,60}')}")
    message = plain_text(page, "kv-message")
    message.filter(has_text="steps of compiling the pattern").wait_for(timeout=30_000)
    assert message.inner_text().startswith("pattern, samples, max_len: this run is estimated at")
    wait_ready(page, timeout=30_000)
    assert query(page)["pattern"] != "(.{0,30}(" + letters + ")){0,60}"  # the default, in the URL too
