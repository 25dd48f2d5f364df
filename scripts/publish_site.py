"""Build the static site and pack it for any static host: one folder and the same as a zip.

    .venv/bin/python scripts/publish_site.py            # -> dist/site/ and dist/kvweb-site.zip
    .venv/bin/python scripts/publish_site.py --no-build # pack the build/site/ already there

Upload dist/site/ (or unpack the zip) anywhere: the server root or a sub-path such as
https://host/kvweb/ (the site refers to its own files by relative URLs only; the check below
refuses a root-absolute one). GitHub Pages does this in .github/workflows/pages.yml. No
special headers are needed; a host that compresses (gzip/brotli) sends much less.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import zipfile
from pathlib import Path

import build_site

ROOT = Path(__file__).resolve().parent.parent

DIST = ROOT / "dist"
# A reference to "/x" (not "//host") would leave a sub-path; the site must not contain one.
ROOT_ABSOLUTE = re.compile(r"""(?:\bsrc|\bhref|\bindexURL|new URL\(|import\(|from )\s*[=:(]?\s*["'](/[^/"'][^"']*)""")


def root_absolute_urls(site: Path) -> list[str]:
    """Root-absolute URLs in the site's pages and scripts (each would break under a sub-path)."""
    found = []
    for path in [site / "index.html", site / "main.mjs"]:
        found += [f"{path.name}: {url}" for url in ROOT_ABSOLUTE.findall(path.read_text())]
    return found


def pack(site: Path, dest: Path) -> tuple[Path, Path]:
    """dest/site/ (a copy of the site, with .nojekyll for GitHub Pages) and dest/kvweb-site.zip."""
    bad = root_absolute_urls(site)
    if bad:
        raise build_site.BuildError(f"the site would not work under a sub-path: {bad}")
    folder = dest / "site"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(site, folder)
    (folder / ".nojekyll").write_text("")  # serve the files as they are (no Jekyll pass)
    archive = dest / "kvweb-site.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(folder).as_posix())
    return folder, archive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-build", action="store_true", help="pack the build/site/ already built")
    parser.add_argument("--out", type=Path, default=DIST, help="where dist/site/ and the zip go (default: dist/)")
    args = parser.parse_args()
    try:
        site = build_site.BUILD / "site" if args.no_build else build_site.build_site()
        if not (site / "index.html").exists():
            raise build_site.BuildError(f"{site}/index.html is missing: run without --no-build")
        folder, archive = pack(site, args.out)
    except (build_site.BuildError, build_site.subprocess.CalledProcessError) as err:
        print(f"[publish-site] FAILED: {err}", file=sys.stderr)
        sys.exit(1)
    print(
        f"[publish-site] {folder} ({build_site.size_mb(folder):.1f} MB) and {archive} "
        f"({archive.stat().st_size / 1e6:.1f} MB): upload either to any static host, root or sub-path"
    )


if __name__ == "__main__":
    main()
