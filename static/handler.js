// kvweb's page side of the Pyodide worker (replaces Panel's pyodide_handler.js): shows
// progress while Python starts, renders the document the worker sends, then keeps the page
// and the worker in sync. Worker text is only ever shown with textContent, never as HTML.
let pyodideWorker = window.kvwebWorker;
let patching = 0;
let stopWord = null;  // the worker's interrupt buffer, where the page is cross-origin isolated
window.kvwebTimings = [];  // [status, worker ms] pairs, read by bench/site_load.py

function showStatus(text, fraction, failed) {
  const box = document.getElementById("kv-loading");
  if (box == null) return;
  box.querySelector(".kv-loading-msg").textContent = text;
  if (fraction != null) box.querySelector("progress").value = fraction;
  if (failed) box.classList.add("kv-failed");
}

// Changes the page makes that Python never reads: a figure's auto range (DataRange1d) works
// out its ends after every redraw, a figure reports its size in pixels after each layout (its
// axes' labels widen or narrow with the data; only the page's own callbacks read it), and a
// widget's value_throttled follows its value (the app watches `value`). Sending them would add
// a trip through the worker to every redraw.
const PAGE_SIZES = new Set(["inner_width", "inner_height", "outer_width", "outer_height"]);
function unread(event) {
  return event.attr === "value_throttled" || PAGE_SIZES.has(event.attr)
    || ((event.attr === "start" || event.attr === "end") && event.model?.constructor?.__name__ === "DataRange1d");
}

// Models whose changes make BokehJS ask for a paint on the next frame, never a layout: data
// sources, a figure's ranges, a time line; and a ReactiveHTML's data (a class BokehJS makes
// for it, named "Model"): kvweb's step texts and player set their text themselves. The
// history box (app/site/history.py) is hidden: its new value only goes to the address bar.
const PAINT_ONLY = new Set(["ColumnDataSource", "Range1d", "DataRange1d", "FactorRange", "Span"]);
function paintOnly(event) {
  const model = event.model && pyodideWorker.jsdoc.get_model_by_id(event.model.id);
  if (model == null) return false;
  return PAINT_ONLY.has(model.type) || model.constructor.__name__ === "Model"
    || (event.attr === "value" && (model.css_classes ?? []).includes("kv-history"));
}

// A task boundary without setTimeout's 4 ms floor for nested calls.
function nextTask() {
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => resolve();
    channel.port2.postMessage(null);
  });
}

function send_change(jsdoc, event) {
  if ((event.setter_id != null && event.setter_id == "py") || patching > 0 || unread(event)) {
    return;
  } else if (pyodideWorker.busy && event.model && event.attr) {
    const events = pyodideWorker.queue.filter((old) => !(old.model === event.model && old.attr === event.attr));
    events.push(event);
    pyodideWorker.queue = events;
    return;
  }
  const patch = jsdoc.create_json_patch([event]);
  pyodideWorker.busy = true;
  pyodideWorker.postMessage({ type: "patch", patch: patch });
}

// The URL the app wrote while it started (app/site/history.py: "0 ?query"), put in the
// address bar before the app is shown: it was written before the page could hear it.
function adoptAppUrl(docs_json) {
  const walk = (node) => {
    if (node == null || typeof node !== "object") return null;
    const attributes = node.attributes;
    if (attributes && (attributes.css_classes ?? []).includes("kv-history")) return attributes.value;
    for (const child of Object.values(node)) {
      const found = walk(child);
      if (found != null) return found;
    }
    return null;
  };
  const search = (walk(docs_json) ?? "").split(" ")[1];
  if (search && search !== window.location.search) {
    window.history.replaceState(null, "", window.location.pathname + search + window.location.hash);
  }
}

// guardDataTables(): app/site/upstream.py's DATATABLE_GUARD, put in front of this script by
// scripts/build_site.py (the served app's page runs the same guard).

// Stop: the cancel button while a run computes (docs/site.md, "Stopping a run"). Its click would
// reach Python only after the run, so the page stops the run itself: isolated, through Pyodide's
// interrupt buffer (a KeyboardInterrupt in the run; the click then reaches Python, which has
// nothing left to stop); otherwise by ending the worker and starting a fresh one on the URL, which
// still holds the state from before the run (the app writes it only when a run has ended).
function onStop(event) {
  if (!event.composedPath().some((el) => el.classList?.contains("kv-cancel"))) return;
  if (stopWord != null) {
    if (Atomics.load(stopWord, 1) === 1) Atomics.store(stopWord, 0, 2);  // SIGINT
  } else if (pyodideWorker.busy) {
    event.stopPropagation();
    restart();
  }
}

function restart() {
  pyodideWorker.terminate();
  window.removeEventListener("popstate", window.kvwebPopstate);  // the old document's
  window.kvwebPopstate = undefined;
  delete document.body.dataset.kvwebReady;
  const box = window.kvwebLoadingBox.cloneNode(true);
  box.classList.remove("kv-beside");
  document.body.prepend(box);
  showStatus("The run was stopped: starting Python again", 0.02, false);
  pyodideWorker = window.kvwebStart();
  attach(pyodideWorker);
}

async function render(msg) {
  guardDataTables();
  const docs_json = JSON.parse(msg.docs_json);
  adoptAppUrl(docs_json);
  const render_items = JSON.parse(msg.render_items);
  const root_ids = JSON.parse(msg.root_ids);
  // Map the worker's roots onto the pre-rendered page's root elements.
  const data_roots = [];
  for (const el of document.querySelectorAll("[data-root-id]")) {
    el.innerHTML = "";
    data_roots.push([el.getAttribute("data-root-id"), el.id]);
  }
  data_roots.sort((a, b) => (a[0] < b[0] ? -1 : 1));
  const roots = {};
  for (let i = 0; i < data_roots.length; i++) roots[root_ids[i]] = data_roots[i][1];
  render_items[0]["roots"] = roots;
  render_items[0]["root_ids"] = root_ids;
  Bokeh.index.roots.map((v) => v.remove());
  const [views] = await Bokeh.embed.embed_items(docs_json, render_items);
  document.body.classList.remove("pn-loading", "{{ loading_spinner }}");
  const jsdoc = [...views.roots.values()][0].model.document;
  pyodideWorker.jsdoc = jsdoc;
  jsdoc.on_change(send_change.bind(null, jsdoc), false);
  // Back and Forward from the first load on (after a reload too): run the history box's
  // callback once (app/site/history.py), which adds the popstate listener; the URL is already shown.
  // The screen box's (app/site/screen.py) tells Python whether the page is a phone's.
  for (const model of jsdoc.all_models) {
    const classes = model.css_classes ?? [];
    if (classes.includes("kv-history") || classes.includes("kv-screen")) model.properties.value.change.emit();
  }
  pyodideWorker.postMessage({ type: "rendered" });
  pyodideWorker.postMessage({ type: "location", location: JSON.stringify(window.location) });
  window.kvwebLoadingBox ??= document.getElementById("kv-loading")?.cloneNode(true);
  document.getElementById("kv-loading")?.remove();
  document.getElementById("kv-early-tour")?.remove();
  document.body.dataset.kvwebReady = String(Math.round(performance.now()));  // ms since navigation
}

async function onMessage(event) {
  const msg = event.data;
  if (msg.type === "idle") {
    if (pyodideWorker.queue.length) {
      const patch = pyodideWorker.jsdoc.create_json_patch(pyodideWorker.queue);
      pyodideWorker.busy = true;
      pyodideWorker.queue = [];
      pyodideWorker.postMessage({ type: "patch", patch: patch });
    } else {
      pyodideWorker.busy = false;
    }
  } else if (msg.type === "stop") {
    stopWord = new Int32Array(msg.buffer);
  } else if (msg.type === "status") {
    window.kvwebTimings.push([msg.msg, msg.ms]);
    showStatus(msg.msg, msg.fraction, false);
  } else if (msg.type === "error") {
    showStatus(`Python failed to start: ${msg.msg}`, null, true);
    document.body.dataset.kvwebError = "1";
  } else if (msg.type === "render") {
    window.kvwebModules = msg.modules;
    await render(msg);
  } else if (msg.type === "patch") {
    // A redraw comes as one patch (app/site/link.py), applied change by change. BokehJS hands a
    // source's new data to its glyphs asynchronously (each glyph's set_data is awaited), and a
    // change that may lay out the page paints at once: such a change after new data waits for
    // the next task (else a legend read the new rows with the old colours: "Offset is outside
    // the bounds of the DataView", the max-rate lab's, on a lab switch). Changes that only ask
    // for a paint on the next frame (`PAINT_ONLY`) do not wait: each wait lets the page paint.
    let data = false;
    for (const event of msg.patch.events) {
      if (event.kind === "ColumnDataChanged" || event.kind === "ColumnsStreamed" || event.kind === "ColumnsPatched") {
        data = true;
      } else if (data && !paintOnly(event)) {
        await nextTask();
        data = false;
      }
      try {
        patching += 1;
        pyodideWorker.jsdoc.apply_json_patch({ ...msg.patch, events: [event] }, msg.buffers);
      } finally {
        patching -= 1;
      }
    }
  }
}

// One message at a time, in order: a patch waiting for the next task holds back the next one.
let handled = Promise.resolve();
function onMessageInTurn(event) {
  handled = handled.then(() => onMessage(event)).catch((error) => console.error(error));
}

function attach(worker) {
  worker.busy = false;
  worker.queue = [];
  worker.onerror = (event) => showStatus(`The Python worker failed: ${event.message}`, null, true);
  worker.onmessage = onMessageInTurn;
}

attach(pyodideWorker);
for (const event of window.kvwebEarly.splice(0)) onMessageInTurn(event);
window.addEventListener("click", onStop, true);
