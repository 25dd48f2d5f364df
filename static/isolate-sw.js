// kvweb's service worker: it serves the site's own files with the headers that make the page
// cross-origin isolated (COOP same-origin, COEP require-corp), which static hosts such as
// GitHub Pages do not let a site set. Isolated, the page gets a SharedArrayBuffer shared with
// Python's worker, and a long run can be stopped in place (docs/site.md, "Stopping a run").
// It only adds headers: every file still comes from the host, and other origins are left alone.
self.addEventListener("install", () => self.skipWaiting());

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (new URL(request.url).origin !== self.location.origin) return;
  if (request.cache === "only-if-cached" && request.mode !== "same-origin") return;
  event.respondWith(fetch(request).then((response) => {
    if (response.type === "opaque" || response.type === "opaqueredirect") return response;
    const headers = new Headers(response.headers);
    headers.set("Cross-Origin-Opener-Policy", "same-origin");
    headers.set("Cross-Origin-Embedder-Policy", "require-corp");
    return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
  }));
});
