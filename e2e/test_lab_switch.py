"""Switching lab (app/lab_area.py: `PICKED` on the page, then `LabArea.show`): from the pick until
the new lab's figures are drawn, no text of the lab shown before is on screen while the status
says ready. Read as a person sees it: every painted frame, the visible text of the lab's area."""

from conftest import table_rows, wait_ready
from site_fixtures import static_site, site_server, wait_live  # noqa: F401  (fixtures)

import kvweb.labs  # noqa: F401  (registers every lab)
from kvweb.lab import LABS

# Watches every painted frame until the status says ready beside the new lab's first step: the
# frames after the pick where it says ready while a cell of the old lab's table is visible are kept.
WATCH = """([old, fresh]) => { window.kvSwitch = new Promise(done => {
  const deep = (root, css) => {
    let found = root.querySelector(css);
    if (found) return found;
    for (const el of root.querySelectorAll('*')) if (el.shadowRoot && (found = deep(el.shadowRoot, css))) return found;
    return null;
  };
  const shown = (root, out) => root.querySelectorAll('*').forEach(el => {
    if (el.shadowRoot) shown(el.shadowRoot, out);
    if (el.checkVisibility({visibilityProperty: true, opacityProperty: true}))
      for (const n of el.childNodes) if (n.nodeType === 3 && n.textContent.trim()) out.push(n.textContent.trim());
  });
  const seen = {frames: 0, statuses: [], stale: [], drawn: false, picked: false};
  const select = deep(deep(document, '.kv-lab-select').shadowRoot, 'select');
  select.addEventListener('input', () => { seen.picked = true }, {capture: true});  // the frames from the pick on count
  setTimeout(() => done(seen), 60000);  // the new lab never drawn: the test fails on `drawn`
  const frame = () => {
    const status = deep(deep(document, '.kv-status').shadowRoot, '.kv-text')?.textContent ?? '';
    const texts = [];
    shown(deep(document, '.kv-lab-main').shadowRoot, texts);
    seen.frames += 1;
    if (seen.statuses.at(-1) !== status) seen.statuses.push(status);
    const ready = status.includes('ready');
    const stale = texts.filter(t => old.includes(t));
    if (seen.picked && ready && stale.length) seen.stale.push(stale[0]);
    if (ready && texts.some(t => t.startsWith(fresh))) done({...seen, drawn: true});
    else requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
}) }"""


def switch(page, base: str, loaded=lambda page: None) -> None:
    page.goto(f"{base}?lab=fsm&samples=2")
    loaded(page)
    wait_ready(page)
    old = [cell for row in table_rows(page, "kv-fsm-outputs") for cell in row if len(cell) > 3]
    assert old
    page.evaluate(WATCH, [old, "request 0 (a new question)"])
    page.locator(".kv-lab-select select").select_option(label=LABS["radix-demo"].title)
    seen = page.evaluate("() => window.kvSwitch")
    assert seen["drawn"], f"radix-demo not drawn: statuses {seen['statuses']}"
    assert seen["stale"] == [], f"an fsm cell beside 'ready': {seen['stale'][:3]}, statuses {seen['statuses']}"
    assert any(s.startswith("loading") for s in seen["statuses"]), seen["statuses"]


def test_a_lab_switch_shows_no_old_figure_beside_ready(page, served_app, guard):
    switch(page, served_app)
    assert guard.errors == []


def test_a_lab_switch_shows_no_old_figure_beside_ready_in_the_static_site(page, static_site):
    switch(page, static_site, loaded=wait_live)
