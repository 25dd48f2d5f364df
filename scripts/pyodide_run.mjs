// Run a Python script, or a module of the repository (as `python -m` would from its root, so
// the checkout's own packages come first), inside real Pyodide under Node:
//   node scripts/pyodide_run.mjs INDEX_DIR SCRIPT.py [ARGS...]
//   node scripts/pyodide_run.mjs INDEX_DIR -m MODULE [ARGS...]
// INDEX_DIR holds the Pyodide core and a pyodide-lock.json listing the wheels beside it
// (build/pyodide-test/ or build/site/pyodide/); every package in that lock whose wheel is
// there is loaded (none for the bare npm core).
// The repository is mounted at its own path, so SCRIPT and ARGS are ordinary paths.
// The exit status is the script's (SystemExit code), 1 on an uncaught Python error.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const [indexArg, ...rest] = process.argv.slice(2);
const module = rest[0] === "-m" ? rest[1] : null;
const [script, ...args] = module ? rest.slice(1) : rest;
if (!indexArg || !script) {
  console.error("usage: node scripts/pyodide_run.mjs INDEX_DIR SCRIPT.py|-m MODULE [ARGS...]");
  process.exit(2);
}
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const indexDir = path.resolve(indexArg) + "/";
const { loadPyodide } = await import(pathToFileURL(path.join(indexDir, "pyodide.mjs")).href);

const started = performance.now();
const pyodide = await loadPyodide({ indexURL: indexDir, packageCacheDir: indexDir });
const lock = JSON.parse(readFileSync(path.join(indexDir, "pyodide-lock.json"), "utf8"));
const packages = Object.values(lock.packages)
  .filter((p) => existsSync(path.join(indexDir, p.file_name)))
  .map((p) => p.name);
await pyodide.loadPackage(packages, { messageCallback: () => {} });
console.error(`[pyodide] Pyodide ${pyodide.version} ready with ${packages.length} packages ` +
  `in ${((performance.now() - started) / 1000).toFixed(1)} s`);

pyodide.mountNodeFS(repo, repo);
pyodide.globals.set("_argv", [module ? script : path.resolve(script), ...args]);
pyodide.globals.set("_module", module);
let status = 0;
try {
  await pyodide.runPythonAsync(`
import os, runpy, sys
sys.argv = list(_argv)
os.chdir(${JSON.stringify(repo)})
sys.path.insert(0, ${JSON.stringify(repo)} if _module else os.path.dirname(sys.argv[0]))
try:
    if _module:
        runpy.run_module(_module, run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(sys.argv[0], run_name="__main__")
    _status = 0
except SystemExit as exit:
    _status = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
`);
  status = pyodide.globals.get("_status");
} catch (err) {
  console.error(String(err));
  status = 1;
}
process.exit(status);
