"""scripts/publish_site.py packs a site for any static host, and refuses one that would break
under a sub-path (a root-absolute URL such as src="/x.js")."""

import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "emscripten", reason="a build script: CPython only")


def site(folder: Path, page: str) -> Path:
    (folder / "pyodide").mkdir(parents=True)
    (folder / "index.html").write_text(page)
    (folder / "main.mjs").write_text('import { loadPyodide } from "./pyodide/pyodide.mjs";')
    (folder / "pyodide" / "pyodide.asm.wasm").write_bytes(b"\0asm")
    return folder


def test_packs_a_folder_and_a_zip_with_the_same_files(tmp_path):
    import publish_site

    folder, archive = publish_site.pack(site(tmp_path / "site", '<script src="./main.mjs"></script>'), tmp_path / "out")
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert files == [".nojekyll", "index.html", "main.mjs", "pyodide/pyodide.asm.wasm"]
    with zipfile.ZipFile(archive) as zf:
        assert sorted(zf.namelist()) == files
        assert zf.read("pyodide/pyodide.asm.wasm") == b"\0asm"


@pytest.mark.parametrize("page", ['<script src="/main.mjs"></script>', '<link href="/panel-cdn/x.css">'])
def test_refuses_a_root_absolute_url(tmp_path, page):
    import publish_site

    with pytest.raises(publish_site.build_site.BuildError, match="sub-path"):
        publish_site.pack(site(tmp_path / "site", page), tmp_path / "out")
