"""Serve a folder on 127.0.0.1 and count what is fetched (the static site for a look, the
e2e tests and bench/site_load.py), at the server root or under a sub-path as a host such as
GitHub Pages does (`--prefix /kvweb/`: only URLs below it exist).

    python scripts/site_server.py [build/site] [--port 8000] [--prefix /kvweb/]
"""

from __future__ import annotations

import argparse
import functools
import http.server
import shutil
import threading
from pathlib import Path


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def send_head(self):  # noqa: ANN201
        if not self.path.startswith(self.server.prefix):  # type: ignore[attr-defined]
            self.send_error(404, "outside the site's sub-path")
            return None
        return super().send_head()

    def translate_path(self, path: str) -> str:
        return super().translate_path("/" + path[len(self.server.prefix) :])  # type: ignore[attr-defined]

    def copyfile(self, source, outputfile) -> None:  # noqa: ANN001
        shutil.copyfileobj(source, outputfile)
        self.server.record(self.path, source.tell())  # type: ignore[attr-defined]

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        self.server.failed.append(f"{code} {self.path}")  # type: ignore[attr-defined]
        super().send_error(code, message, explain)


class SiteServer(http.server.ThreadingHTTPServer):
    """A threaded static server in a background thread; `fetched` is bytes sent per path."""

    daemon_threads = True

    def __init__(self, folder: Path, port: int = 0, prefix: str = "/") -> None:
        super().__init__(("127.0.0.1", port), functools.partial(_Handler, directory=str(folder)))
        self.prefix = "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"
        self.fetched: dict[str, int] = {}
        self.failed: list[str] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{self.prefix}"

    def record(self, path: str, sent: int) -> None:
        with self._lock:
            self.fetched[path] = self.fetched.get(path, 0) + sent

    def reset(self) -> None:
        with self._lock:
            self.fetched.clear()
            self.failed.clear()

    def __enter__(self) -> SiteServer:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", nargs="?", default="build/site", type=Path)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--prefix", default="/", help="serve the folder under this sub-path (e.g. /kvweb/)")
    args = parser.parse_args()
    if not (args.folder / "index.html").exists():
        parser.error(f"{args.folder}/index.html is missing: run scripts/build-site.sh first")
    with SiteServer(args.folder, args.port, args.prefix) as server:
        print(f"serving {args.folder} at {server.url} (Ctrl-C stops)")
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
