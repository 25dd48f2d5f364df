// kvweb's Pyodide worker. Pyodide 314 only runs in module workers; everything it loads
// comes from ./pyodide/ (core, wheels, and a lock file listing exactly those wheels).
import { loadPyodide } from "./pyodide/pyodide.mjs";

const PACKAGES = @PACKAGES@;
const ENV = @ENV@;
// [file, subresource integrity] of every wheel: fetched now, while Pyodide boots, and
// handed to loadPackage when it asks (it would otherwise start fetching after the boot).
const WHEELS = @WHEELS@;

const early = new Map();
for (const [file, integrity] of WHEELS) {
  const url = new URL(`./pyodide/${file}`, self.location.href).href;
  early.set(url, fetch(url, { integrity }));
}
const networkFetch = globalThis.fetch;
globalThis.fetch = (input, init) => {
  const url = new URL(input instanceof Request ? input.url : String(input), self.location.href).href;
  const response = early.get(url);
  early.delete(url);
  return response ?? networkFetch(input, init);
};

// Stopping a run in place, where the page is cross-origin isolated (docs/site.md, "Stopping a
// run"): [0] is Pyodide's interrupt word (the page writes 2, SIGINT: a KeyboardInterrupt in the
// running Python), [1] is 1 while a run may be stopped (app/site/interrupt.py). The page gets
// the buffer with the first status message.
const stop = self.crossOriginIsolated ? new Int32Array(new SharedArrayBuffer(8)) : null;
function stoppable(on) {
  Atomics.store(stop, 1, on ? 1 : 0);
  if (!on) Atomics.store(stop, 0, 0);  // a stop that came as the run ended stops nothing else
}

function status(msg, fraction) {
  self.postMessage({ type: "status", msg, fraction, ms: Math.round(performance.now()) });
}

function sendPatch(patch, buffers, msg_id) {
  self.postMessage({ type: "patch", patch, buffers });
}

async function start(location) {
  if (stop) self.postMessage({ type: "stop", buffer: stop.buffer });
  status("Starting Python (Pyodide)", 0.05);
  const pyodide = await loadPyodide({ indexURL: "./pyodide/", env: ENV });
  if (stop) pyodide.setInterruptBuffer(stop);
  status(`Installing ${PACKAGES.length} packages`, 0.35);
  await pyodide.loadPackage(PACKAGES, { messageCallback: () => {}, errorCallback: (msg) => console.error(msg) });
  self.pyodide = pyodide;
  pyodide.globals.set("sendPatch", sendPatch);
  pyodide.globals.set("_kvweb_location", location);
  status("Starting the app", 0.7);
  const [docs_json, render_items, root_ids] = await pyodide.runPythonAsync(`{{ code }}`);
  status("Drawing", 0.9);
  // What Python imported (window.kvwebModules in the page): the check for [site.drop].
  const modules = pyodide.runPython("import sys; ' '.join(sorted({m.split('.')[0] for m in sys.modules}))");
  self.postMessage({ type: "render", docs_json, render_items, root_ids, modules });
}

self.onmessage = async (event) => {
  const msg = event.data;
  if (msg.type === "start") {
    try {
      await start(msg.location);
    } catch (e) {
      console.error(e);
      const lines = `${e}`.trim().split("\n");
      self.postMessage({ type: "error", msg: lines[lines.length - 1] });
    }
  } else if (msg.type === "rendered") {
    self.pyodide.runPythonAsync(`
from app.site.link import link
link(sendPatch)
`);
    if (stop) {
      self.pyodide.globals.set("stoppable", stoppable);
      self.pyodide.runPythonAsync(`
from app.site.interrupt import install
install(stoppable)
`);
    }
  } else if (msg.type === "patch") {
    self.pyodide.globals.set("patch", msg.patch);
    try {
      await self.pyodide.runPythonAsync(`
from app.site.link import apply_patch
apply_patch(patch)
`);
    } catch (e) {
      console.error(e);  // a failing callback must not leave the page waiting for "idle"
    } finally {
      self.postMessage({ type: "idle" });
    }
  } else if (msg.type === "location") {
    self.pyodide.globals.set("location", msg.location);
    self.pyodide.runPythonAsync(`
from app.site.location import follow_json
follow_json(location)
`);
  }
};
