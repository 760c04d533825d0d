"""Look at the built site in a headless browser: the concept pages show the notebooks' pictures and tables,
visible and not cut at the column's edge; screenshots of each page.

Serves the built site (``mkdocs build``, default ``build/site``) on localhost, opens every concept page in
Chromium through Playwright and, for each notebook output (``.nb-output``: a rich view, a picture) and each text
block and table of the page's content, checks that

* it has a nonzero size and is visible (not ``display: none`` / ``visibility: hidden``);
* nothing is clipped: the content column does not overflow sideways (its ``scrollWidth`` is at most its
  ``clientWidth``, nor does the page's), and an element wider than its box sits in a frame that scrolls
  (``overflow-x: auto`` or ``scroll``); a notebook picture that scrolls says so in a note under it;

and writes to ``--out``, per concept page, a full-page screenshot (``NAME.png``), the window scrolled to its
first picture (``NAME.view.png``) and its widest picture (``NAME.widest.png``).

    pip install playwright                 # the Python package only; the browser is the system's Chromium
    apt-get install chromium               # (Debian); or --browser PATH
    python docs/scripts/check_site.py [--site build/site] [--out build/site-check] [--page 03_dual_gemm]

Exit status 0 when every check passes, 1 otherwise (each problem printed). Playwright is imported only here
(never by the site build or the test suite's other tests); ``tests/test_docs_site.py`` runs this when Playwright
and Chromium are present and skips, saying why, when not.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import shutil
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1280, "height": 900}
"""A laptop-sized window: Material shows both side bars, so the text column is at its narrowest of the wide
layouts."""


def find_browser(path: str | None = None) -> str | None:
    """The Chromium to drive: ``path``, else ``chromium`` / ``chromium-browser`` / ``google-chrome`` on PATH."""
    if path:
        return path if Path(path).exists() else None
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def missing_requirements(browser: str | None = None) -> str | None:
    """Why the check cannot run here (``None`` when it can)."""
    import importlib.util

    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is not installed (pip install playwright; no browser download needed)"
    if find_browser(browser) is None:
        return "no Chromium found (apt-get install chromium, or pass --browser PATH)"
    return None


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """A thread serving ``site`` on a free localhost port; returns the server and its base URL."""
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def concept_pages(site: Path) -> list[str]:
    return sorted(p.stem for p in (site / "concepts").glob("*.html"))


# Runs in the page: every output, text block and table of the content, with its box and how it overflows.
_MEASURE = r"""
() => {
  const content = document.querySelector('.md-content');
  const inner = document.querySelector('.md-content__inner') || content;
  const box = (el) => { const r = el.getBoundingClientRect(); return {w: r.width, h: r.height}; };
  const visible = (el) => { const s = getComputedStyle(el);
    return s.display !== 'none' && s.visibility !== 'hidden' && el.getClientRects().length > 0; };
  // the nearest element (itself or an ancestor inside the content) that scrolls sideways
  const scroller = (el) => { for (let e = el; e && e !== inner; e = e.parentElement) {
      const s = getComputedStyle(e).overflowX; if (s === 'auto' || s === 'scroll') return e; } return null; };
  const item = (el, kind) => {
    const sc = scroller(el);
    const out = el.closest('.nb-output');
    const next = out ? out.nextElementSibling : null;
    return {kind, ...box(el), visible: visible(el), scrollWidth: el.scrollWidth, clientWidth: el.clientWidth,
            frame: sc ? {scrollWidth: sc.scrollWidth, clientWidth: sc.clientWidth,
                         overflowX: getComputedStyle(sc).overflowX} : null,
            right: el.getBoundingClientRect().right,
            note: !!(next && next.classList.contains('nb-scroll-note') && visible(next)),
            text: (el.innerText || '').slice(0, 60)};
  };
  const outputs = [...inner.querySelectorAll('.nb-output')].map(o => {
    const pic = o.querySelector('pre, svg, img') || o; return item(pic, 'output:' + pic.tagName.toLowerCase()); });
  const blocks = [...inner.querySelectorAll('pre')].filter(p => !p.closest('.nb-output')).map(p => item(p, 'pre'));
  const tables = [...inner.querySelectorAll('table')].map(t => item(t, 'table'));
  const images = [...inner.querySelectorAll('img, svg')].filter(i => !i.closest('.nb-output') && !i.closest('.md-icon')
    && !i.closest('a.headerlink')).map(i => item(i, 'image'));
  return {content: {scrollWidth: content.scrollWidth, clientWidth: content.clientWidth,
                    right: content.getBoundingClientRect().right},
          page: {scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth},
          outputs, blocks, tables, images, title: document.title};
}
"""


def problems_of(page: str, m: dict) -> list[str]:
    """What is wrong on a page, from its measurement (see the module text).

    >>> ok = {"kind": "output:pre", "w": 600, "h": 80, "visible": True, "scrollWidth": 900, "clientWidth": 600,
    ...       "frame": {"scrollWidth": 900, "clientWidth": 600, "overflowX": "auto"}, "note": True, "text": "x"}
    >>> m = {"content": {"scrollWidth": 700, "clientWidth": 700}, "page": {"scrollWidth": 1280, "innerWidth": 1280},
    ...      "outputs": [ok], "blocks": [], "tables": [], "images": []}
    >>> problems_of("p", m)
    []
    >>> cut = {**ok, "frame": None}; problems_of("p", {**m, "outputs": [cut, {**ok, "note": False}]})
    ['p: output:pre 1 "x" is 900 px wide in a 600 px box and nothing scrolls', \
'p: output:pre 2 "x" scrolls sideways but no note says so']
    """
    out = []
    if m["content"]["scrollWidth"] > m["content"]["clientWidth"] + 1:
        out.append(f"{page}: the content column overflows ({m['content']['scrollWidth']} > "
                   f"{m['content']['clientWidth']} px)")
    if m["page"]["scrollWidth"] > m["page"]["innerWidth"] + 1:
        out.append(f"{page}: the page scrolls sideways ({m['page']['scrollWidth']} > {m['page']['innerWidth']} px)")
    if not m["outputs"]:
        out.append(f"{page}: no notebook output on the page")
    for group in ("outputs", "blocks", "tables", "images"):
        for i, it in enumerate(m[group], 1):
            name = f"{it['kind']} {i} {json.dumps(it['text'][:30])}"
            if not it["visible"] or it["w"] <= 0 or it["h"] <= 0:
                out.append(f"{page}: {name} is not visible ({it['w']:.0f} x {it['h']:.0f} px)")
                continue
            wide = it["scrollWidth"] > it["clientWidth"] + 1
            frame = it["frame"]
            if wide and (frame is None or frame["overflowX"] not in ("auto", "scroll")):
                out.append(f"{page}: {name} is {it['scrollWidth']} px wide in a {it['clientWidth']} px box and "
                           "nothing scrolls")
            elif group == "outputs" and wide and not it["note"]:
                out.append(f"{page}: {name} scrolls sideways but no note says so")
            elif group == "outputs" and not wide and it["note"]:
                out.append(f"{page}: {name} fits its frame but a note says it scrolls")
    return out


def check_site(site: Path, out: Path | None = None, pages: list[str] | None = None,
               browser: str | None = None, full_page: bool = True) -> tuple[list[str], dict[str, dict]]:
    """``(problems, {page: measurement})`` for the concept pages of the built ``site``; screenshots to ``out``
    (``full_page=False``: the first-picture and widest-picture shots only, a few times faster)."""
    from playwright.sync_api import sync_playwright

    exe = find_browser(browser)
    pages = pages or concept_pages(site)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    server, base = serve(site)
    problems, measured = [], {}
    try:
        with tempfile.TemporaryDirectory(prefix="simtc-chromium-") as profile, sync_playwright() as pw:
            ctx = pw.chromium.launch_persistent_context(profile, executable_path=exe, headless=True,
                                                        args=CHROMIUM_ARGS, viewport=VIEWPORT)
            try:
                tab = ctx.new_page()
                for name in pages:
                    url = f"{base}/concepts/{name}.html"
                    response = tab.goto(url, wait_until="load")
                    if response is None or response.status != 200:
                        problems.append(f"{name}: {url} answered {response.status if response else 'nothing'}")
                        continue
                    m = tab.evaluate(_MEASURE)
                    measured[name] = m
                    problems += problems_of(name, m)
                    if out is not None:
                        if full_page:
                            tab.screenshot(path=str(out / f"{name}.png"), full_page=True)
                        shots = tab.locator(".md-content__inner .nb-output")
                        if shots.count():
                            tab.evaluate("el => window.scrollTo(0, el.getBoundingClientRect().top + window.scrollY"
                                         " - 120)", shots.first.element_handle())
                            tab.screenshot(path=str(out / f"{name}.view.png"))
                            widest = max(range(shots.count()), key=lambda i: m["outputs"][i]["scrollWidth"])
                            shots.nth(widest).scroll_into_view_if_needed()
                            shots.nth(widest).screenshot(path=str(out / f"{name}.widest.png"))
            finally:
                ctx.close()
    finally:
        server.shutdown()
        server.server_close()
    return problems, measured


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "build" / "site", help="the built site (mkdocs build)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "site-check", help="where screenshots go")
    parser.add_argument("--page", action="append", help="a concept page (file stem); default: all")
    parser.add_argument("--browser", help="the Chromium executable (default: found on PATH)")
    args = parser.parse_args(argv)
    why = missing_requirements(args.browser)
    if why:
        print(f"cannot check the site: {why}", file=sys.stderr)
        return 2
    if not (args.site / "concepts").is_dir():
        print(f"no built site at {args.site} (mkdocs build first)", file=sys.stderr)
        return 2
    problems, measured = check_site(args.site, args.out, args.page, args.browser)
    for name, m in measured.items():
        wide = sum(1 for o in m["outputs"] if o["scrollWidth"] > o["clientWidth"] + 1)
        print(f"{name}: {len(m['outputs'])} notebook outputs ({wide} scroll sideways), {len(m['blocks'])} code "
              f"blocks, {len(m['tables'])} tables; content column {m['content']['clientWidth']} px")
    for p in problems:
        print(p, file=sys.stderr)
    print(f"screenshots in {args.out}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
