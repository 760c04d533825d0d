"""Open the stepping notebooks in a real JupyterLab, as a new user would, and press the widget's buttons in a browser.

What a learner does with the README alone: install the ``notebooks`` extra, run ``jupyter lab notebooks/``, open
notebook 03, *Run > Run All Cells*, and step through the 18 dual-GEMM instructions with the stepping widget
(:class:`simtc.render.widget.StepperWidget`) watching Tensor Memory fill. This script does exactly that, headless:

1. the Python environment: this interpreter (it needs the ``notebooks`` extra: JupyterLab, ipywidgets, ipykernel),
   or with ``--fresh`` a new virtual environment made by the README's own notebook command (``python3 -m venv ...
   && .../pip install -q -e ".[notebooks]"``, its ``.venv`` replaced by a temporary directory);
2. ``jupyter lab`` (the README's command) on a free localhost port with a fixed token, ``--no-browser``, its root a
   temporary copy of ``notebooks/`` (nothing is written into the repository) and its config, runtime, data,
   settings and workspace directories temporary; stopped at the end, its kernels shut down first;
3. the system's Chromium driven by Playwright (headless, a fresh profile; no browser is downloaded);
4. notebook 03: *Run All Cells* from the *Run* menu, waits until the kernel is idle and no cell shows ``[*]``, saves
   it (Ctrl+S) and reads the saved file: every code cell ran, none has an error output, and the last cell (the
   asserts that answer Q1 and Q2) printed ``all facts of notebook 03 hold``. Then the widget: 17 presses of
   *next MMA* from the first QK instruction, after each the picture's event line names the next of the 18 QK
   instructions (``QK RoPE k=0, 1``, ``QK k=0`` ... ``15``), the status line and the slider show the same step, and
   the picture's Tensor Memory part is redrawn; then *go* with *role mma* chosen until ``QK k=15`` completes: P
   (lanes 0-127, columns 400-463) has that instruction as its last writer; then *back*, and a step typed into the
   slider's readout;
5. notebook 04: *Run All Cells*, the same checks of the saved file, a few presses of *next*, *next completion*
   and *back*, and the slider's handle moved with the keyboard (one step) and dragged with the mouse.

Screenshots (``--screenshots DIR``, default a new temporary directory that is kept) of notebook 03's widget at the
first QK instruction, after the first press, after the 18th instruction and after its completion (each twice: the
controls, and the Tensor Memory map scrolled into view), and of notebook 04's widget.

    pip install playwright                 # the Python package only; the browser is the system's Chromium
    apt-get install chromium               # (Debian); or --browser PATH
    python docs/scripts/check_jupyterlab.py [--fresh] [--screenshots DIR] [--notebook 03_dual_gemm]

Exit status 0 when every check passes, 1 otherwise (each problem printed), 2 when it cannot run here.
``tests/test_jupyterlab.py`` runs it in this interpreter when JupyterLab, ipywidgets, Playwright and Chromium are
present and skips, saying why, when not.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "simtc-jupyterlab-check"
VIEWPORT = {"width": 1400, "height": 1000}
QK_LABELS = ["QK RoPE k=0", "QK RoPE k=1", *(f"QK k={k}" for k in range(16))]
"""Block 0's 18 QK (dual-GEMM) instructions in issue order, as the widget's picture names them (the record labels of
``simtc.kernels.flashmla.qk_mmas`` without "NoPE"; notebook 03 section 3)."""
NOTEBOOKS = ("03_dual_gemm", "04_pipeline_timeline")
LAST_LINE = {"03_dual_gemm": "all facts of notebook 03 hold", "04_pipeline_timeline": "all facts of notebook 04 hold"}
P_COLUMNS = (400, 463)
"""Where the dual GEMM writes P (notebook 03 section 2; ``simtc.kernels.flashmla.P_COLUMN`` + ``B_TOPK`` - 1)."""


def _check_site():
    spec = importlib.util.spec_from_file_location("_simtc_check_site", Path(__file__).with_name("check_site.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_site = _check_site()
CHROMIUM_ARGS = _site.CHROMIUM_ARGS
find_browser = _site.find_browser


def missing_requirements(browser: str | None = None, fresh: bool = False) -> str | None:
    """Why the check cannot run here (``None`` when it can); with ``fresh`` JupyterLab comes from the new venv."""
    why = _site.missing_requirements(browser)
    if why:
        return why
    if not fresh:
        lacking = [m for m in ("jupyterlab", "ipywidgets", "ipykernel") if importlib.util.find_spec(m) is None]
        if lacking:
            return (f"{', '.join(lacking)} not installed in this interpreter (the notebooks extra: pip install -e "
                    "'.[notebooks]'; or run docs/scripts/check_jupyterlab.py --fresh)")
    return None


# ---------------------------------------------------------------------------------------------------- environment
def readme_notebook_command(readme: Path = ROOT / "README.md") -> list[str]:
    """The README's command that opens the notebooks, split at ``&&``: make the venv, the install steps (the extra,
    then CuTe's pycute from the ``nvidia-cutlass`` wheel, which notebook 03 computes layouts with), start JupyterLab.

    >>> make, *installs, start = readme_notebook_command()
    >>> make.startswith("python3 -m venv"), '".[notebooks]"' in installs[0], start.split()[1:]
    (True, True, ['lab', 'notebooks/'])
    """
    for block in re.findall(r"```bash\n(.*?)```", readme.read_text(encoding="utf-8"), flags=re.S):
        if ".[notebooks]" in block and "jupyter lab" in block:
            parts = [p.strip() for p in " ".join(block.split()).split("&&")]
            if len(parts) >= 3:
                return parts
    raise SystemExit("README.md has no `python3 -m venv ... && pip install ...[notebooks] && jupyter lab` command")


def make_fresh_env(dest: Path, log=print) -> Path:
    """A new virtual environment at ``dest`` made by the README's notebook command (its ``.venv`` replaced by
    ``dest``, run from the repository root); returns its ``jupyter`` executable."""
    make, *installs, _ = readme_notebook_command()
    for step in (make, *installs):
        argv = [a.replace(".venv", str(dest), 1) if a.startswith(".venv") or a == ".venv" else a
                for a in shlex.split(step)]
        log("$ " + shlex.join(argv))
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"{shlex.join(argv)} failed ({done.returncode}):\n{done.stdout[-2000:]}"
                               f"\n{done.stderr[-2000:]}")
    return dest / "bin" / "jupyter"


def this_jupyter() -> list[str]:
    """The ``jupyter`` of this interpreter's environment (``python -m jupyterlab`` without one)."""
    exe = Path(sys.executable).parent / "jupyter"
    return [str(exe), "lab"] if exe.exists() else [sys.executable, "-m", "jupyterlab"]


# ---------------------------------------------------------------------------------------------------- the server
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterLab:
    """``jupyter lab`` on localhost, headless, in temporary directories; a context manager that always stops it
    (its kernels shut down through the REST API first, then the server by its process id)."""

    def __init__(self, command: list[str], work: Path, notebooks: Path = ROOT / "notebooks", timeout: float = 180):
        self.work, self.timeout = work, timeout
        self.root = work / "root" / "notebooks"
        shutil.copytree(notebooks, self.root)
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = work / "jupyter-lab.log"
        dirs = {k: work / "jupyter" / k for k in ("config", "runtime", "data", "ipython", "settings", "workspaces")}
        for d in dirs.values():
            d.mkdir(parents=True)
        # no news or update notifications over the notebook (JupyterLab asks on first start)
        note = dirs["settings"] / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
        note.parent.mkdir(parents=True)
        note.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        self.env = dict(os.environ, JUPYTER_CONFIG_DIR=str(dirs["config"]), JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
                        JUPYTER_DATA_DIR=str(dirs["data"]), IPYTHONDIR=str(dirs["ipython"]),
                        JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
                        JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]), JUPYTER_PLATFORM_DIRS="1",
                        SIMTC_PROGRESS="0", MPLBACKEND="Agg")
        self.argv = [*command, str(self.root), "--no-browser", "--ip=127.0.0.1", f"--port={self.port}",
                     "--port-retries=0", f"--IdentityProvider.token={TOKEN}",
                     "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                     "--LabApp.extension_manager=readonly"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            self.argv.append("--allow-root")  # Jupyter refuses to run as root without it (containers)
        self.proc: subprocess.Popen | None = None

    def url(self, path: str) -> str:
        return f"{self.base}/{path}?token={TOKEN}"

    def _get(self, path: str, method: str = "GET"):
        req = urllib.request.Request(f"{self.base}/{path}", method=method,
                                     headers={"Authorization": f"token {TOKEN}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def __enter__(self) -> JupyterLab:
        self.log = self.log_path.open("w")
        self.proc = subprocess.Popen(self.argv, cwd=self.work, env=self.env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        t0 = time.monotonic()
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                self._get("api/status")
                break
            except OSError as exc:
                if time.monotonic() - t0 > self.timeout:
                    self.stop()
                    why = f"jupyter lab did not answer in {self.timeout:.0f} s:\n{self.log_tail()}"
                    raise RuntimeError(why) from exc
                time.sleep(0.5)
        self.started_s = time.monotonic() - t0
        return self

    def log_tail(self, n: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-n:]

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            for k in self._get("api/kernels") or []:
                self._get(f"api/kernels/{k['id']}", method="DELETE")
        except OSError:
            pass
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its own session, started above
            self.proc.wait(timeout=30)

    def __exit__(self, *exc) -> None:
        try:
            self.stop()
        finally:
            self.log.close()


# ---------------------------------------------------------------------------------------------------- the page
# Every code cell has run ([n]:), none is queued or running ([*]:), the kernel is idle; or a cell failed (Run All
# then stops: the cells after it keep [ ]:, and an error output shows a traceback).
_DONE = """() => {
  const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  const p = [...nb.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(e => e.textContent.trim());
  const i = nb.querySelector('.jp-Notebook-ExecutionIndicator');
  if (!i || i.dataset.status !== 'idle' || p.some(t => t.includes('*'))) return false;
  const failed = [...nb.querySelectorAll('.jp-OutputArea-output[data-mime-type*="stderr"]')]
    .some(e => /Traceback|Error:/.test(e.textContent));
  return p.every(t => /^\\[\\d+\\]:$/.test(t)) || failed;
}"""

_WIDGET_STATE = """box => {
  const q = s => box.querySelector(s);
  const pic = q(':scope > .widget-html .widget-html-content');
  return {status: q(':scope > .widget-label').textContent, readout: q('.widget-readout').textContent.trim(),
          handle: (q('.noUi-handle') || {getAttribute: () => null}).getAttribute('aria-valuenow'),
          picture: pic ? pic.textContent : ''};
}"""

_EVENT_LINE = re.compile(r"^step (\d+) of (\d+)\s+cycle (\d+)\s+(\S+)(?: record #\d+)?\s+(\w+)(?:\s+\((.*)\))?\s*$")


def parse_state(raw: dict) -> dict:
    """The widget's state as shown: the step in the status line, on the slider (its readout) and in the picture's
    event line, the event's kind and label, and the picture's Tensor Memory part (its title, and the map and legend
    without it).

    >>> pic = ("step 592 of 3257  cycle 7503  mma[w4] record #36  issue  (QK RoPE k=1)\\n  tcgen05.mma...\\n"
    ...        "Tensor Memory at step 592: the instruction that last wrote each cell (18432 cells written)\\n"
    ...        "   0-3  ··0123··\\nshared memory: 11 of 18 buffers written\\n")
    >>> s = parse_state({"status": "step 592 of 3257 · cycle 7503 · mma[w4] issue", "readout": "592",
    ...                  "handle": "592.0", "picture": pic})
    >>> (s["step"], s["slider"], s["event_step"], s["kind"], s["label"], s["tmem_map"])
    (592, 592, 592, 'issue', 'QK RoPE k=1', '   0-3  ··0123··')
    """
    status = raw["status"]
    m = re.match(r"step (\d+) of (\d+)", status)
    lines = raw["picture"].splitlines()
    ev = _EVENT_LINE.match(lines[0]) if lines else None
    pic = raw["picture"]
    start = pic.find("Tensor Memory at step")
    end = pic.find("\nshared memory:", start) if start >= 0 else -1
    tmem = pic[start:end if end >= 0 else None] if start >= 0 else ""
    title, _, body = tmem.partition("\n")
    return {"status": status, "step": int(m.group(1)) if m else None, "total": int(m.group(2)) if m else None,
            "slider": int(raw["readout"]) if raw["readout"].isdigit() else None,
            "handle": int(float(raw["handle"])) if raw.get("handle") else None,
            "event_line": lines[0] if lines else "", "event_step": int(ev.group(1)) if ev else None,
            "kind": ev.group(5) if ev else None, "label": ev.group(6) if ev else None,
            "tmem_title": title, "tmem_map": body.rstrip("\n")}


def p_writer(tmem_map: str) -> str | None:
    """The legend entry of the instruction that last wrote P, from the Tensor Memory map's text (1 character = 4
    lanes x 8 columns; P's 64 columns are characters 50-57 of each row, all rows the same), or None.

    >>> row = "   0-3     " + "·" * 32 + "0123456789abcdefgh" + "iiiiiiii" + "······"
    >>> p_writer(row + "\\n  0   mma[w4]#12 cp Q t=0 s=0\\n  i   mma[w4]#36 QK RoPE k=1   ")
    'mma[w4]#36 QK RoPE k=1'
    """
    rows = [ln for ln in tmem_map.splitlines() if re.match(r"^\s*\d+-\d+\s{2,}\S", ln)]
    legend = dict(re.findall(r"^\s{1,3}(\S)\s{3}(\S.*?)\s*$", tmem_map, flags=re.M))
    first, last = P_COLUMNS[0] // 8, P_COLUMNS[1] // 8
    marks = {row.split()[1][first:last + 1] for row in rows if len(row.split()) > 1}
    if len(marks) != 1:
        return None
    (mark,) = marks
    return legend.get(mark[0]) if len(set(mark)) == 1 else None


class Page:
    """A JupyterLab tab driven through Playwright: the notebook, its menus, its widget."""

    def __init__(self, page, lab: JupyterLab, shots: Path, timeout_ms: int):
        self.page, self.lab, self.shots, self.timeout = page, lab, shots, timeout_ms
        self.panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        self.console: list[str] = []
        self.dialogs: list[str] = []
        page.on("console", lambda m: self.console.append(f"{m.type}: {m.text[:300]}")
                if m.type == "error" else None)
        page.on("pageerror", lambda e: self.console.append(f"pageerror: {str(e)[:300]}"))

    def open(self, name: str) -> float:
        t0 = time.monotonic()
        # reset: the workspace starts empty, the tab opened before is not restored beside this one
        self.page.goto(self.lab.url(f"lab/tree/{name}.ipynb") + "&reset", wait_until="domcontentloaded",
                       timeout=self.timeout)
        self.panel.locator(".jp-CodeCell").first.wait_for(timeout=self.timeout)
        self.panel.locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]').wait_for(timeout=self.timeout)
        self.page.wait_for_timeout(2000)
        self.dialogs += self.accept_dialogs()
        return time.monotonic() - t0

    def accept_dialogs(self) -> list[str]:
        """Accept any dialog JupyterLab shows (as a user would: *Select Kernel* -> Select, the default Python 3);
        returns their titles."""
        seen = []
        dialog = self.page.locator(".jp-Dialog")
        while dialog.count():
            seen.append(dialog.first.locator(".jp-Dialog-header").inner_text().strip())
            dialog.first.locator(".jp-Dialog-button.jp-mod-accept").click()
            self.page.wait_for_timeout(1000)
        return seen

    def menu(self, menu: str, item: str) -> None:
        self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(menu)}$")).click()
        self.page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).click()

    def run_all(self) -> float:
        t0 = time.monotonic()
        self.menu("Run", "Run All Cells")
        self.page.wait_for_function("() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) "
                                    ".jp-InputPrompt')].some(e => e.textContent.includes('*'))",
                                    timeout=self.timeout, polling=100)
        self.page.wait_for_function(_DONE, timeout=self.timeout, polling=1000)
        return time.monotonic() - t0

    def save(self, path: Path) -> None:
        """Save the notebook (Ctrl+S, as a user would) and wait until the file at ``path`` is rewritten and the
        tab no longer shows unsaved changes."""
        before = path.stat().st_mtime_ns
        self.panel.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
        self.page.keyboard.press("Escape")
        self.page.keyboard.press("Control+s")
        deadline = time.monotonic() + self.timeout / 1000
        while path.stat().st_mtime_ns == before and time.monotonic() < deadline:
            time.sleep(0.2)
        self.page.wait_for_function("() => !document.querySelector('.lm-TabBar-tab.jp-mod-current.jp-mod-dirty')",
                                    timeout=self.timeout)

    def dom_errors(self) -> list[str]:
        return self.page.evaluate("""() => [...document.querySelectorAll(
            '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output')]
          .filter(e => /Traceback \\(most recent call last\\)|^\\w+Error: /m.test(e.textContent))
          .map(e => e.textContent.slice(0, 300))""")

    def cells(self) -> list[dict]:
        """Each code cell's prompt and the start of its error outputs, as the page shows them."""
        return self.page.evaluate("""() => [...document.querySelectorAll(
            '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell')].map(c => ({
              prompt: (c.querySelector('.jp-InputPrompt') || {}).textContent,
              errors: [...c.querySelectorAll('.jp-OutputArea-output')].map(o => o.textContent)
                .filter(t => /Traceback|Error/.test(t)).map(t => t.slice(0, 2000))}))""")

    def shows(self, text: str) -> bool:
        """Some output area of the notebook shows ``text`` (not its source)."""
        return self.panel.locator(".jp-OutputArea-output", has_text=text).count() > 0

    # ------------------------------------------------------------ the widget
    def widget(self):
        button = self.panel.locator(".widget-button", has_text="next MMA").first
        button.wait_for(state="visible", timeout=self.timeout)
        return button.locator("xpath=ancestor::div[contains(@class,'widget-vbox')][1]")

    def state(self, box) -> dict:
        return parse_state(box.evaluate(_WIDGET_STATE))

    def press(self, box, label: str, before: dict) -> dict:
        """Press the button ``label`` and wait until the status line changes (or says why it could not move)."""
        box.locator(".widget-button", has_text=label).first.click()
        self.page.wait_for_function(
            """([box, before]) => { const s = box.querySelector(':scope > .widget-label').textContent;
                return s !== before || s.includes(' · no further') || s.includes('at the end'); }""",
            arg=[box.element_handle(), before["status"]], timeout=self.timeout, polling=100)
        return self._settled(box)

    def _settled(self, box) -> dict:
        """The state once the status, the slider and the picture agree (they arrive as separate widget updates)."""
        deadline = time.monotonic() + min(60.0, self.timeout / 1000)
        while True:
            raw = box.evaluate(_WIDGET_STATE)
            st = parse_state(raw)
            if st["step"] == st["slider"] == st["event_step"] or time.monotonic() > deadline:
                st["raw"] = raw
                return st
            time.sleep(0.1)

    def type_step(self, box, step: int, before: dict) -> dict:
        """Type a step into the slider's readout and press Enter (the slider's own text box)."""
        readout = box.locator(".widget-readout")
        readout.click()
        self.page.keyboard.press("Control+a")
        self.page.keyboard.type(str(step))
        self.page.keyboard.press("Enter")
        self.page.wait_for_function(
            "([box, before]) => box.querySelector(':scope > .widget-label').textContent !== before",
            arg=[box.element_handle(), before["status"]], timeout=self.timeout, polling=100)
        return self._settled(box)

    def slide(self, box, how: str, before: dict) -> dict:
        """Move the slider's handle: a key pressed on it (``ArrowRight``), or ``drag`` (100 px to the right)."""
        handle = box.locator(".noUi-handle")
        if how == "drag":
            bb = handle.bounding_box()
            x, y = bb["x"] + bb["width"] / 2, bb["y"] + bb["height"] / 2
            self.page.mouse.move(x, y)
            self.page.mouse.down()
            self.page.mouse.move(x + 100, y, steps=10)
            self.page.mouse.up()
        else:
            handle.focus()
            handle.press(how)
        self.page.wait_for_function(
            "([box, before]) => box.querySelector(':scope > .widget-label').textContent !== before",
            arg=[box.element_handle(), before["status"]], timeout=self.timeout, polling=100)
        return self._settled(box)

    def shoot(self, box, name: str, tmem: bool = True) -> list[Path]:
        """Screenshots: the widget's controls at the top of the window, and (``tmem``) its Tensor Memory map."""
        out = []
        self._scroll_to(box, "el => el")
        out.append(self.shots / f"{name}.png")
        self.page.screenshot(path=str(out[-1]))
        if tmem:
            self._scroll_to(box, """box => { const pre = box.querySelector('.widget-html-content pre');
              const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
              for (let n = walker.nextNode(); n; n = walker.nextNode()) {
                if (n.textContent.includes('Tensor Memory at step')) return n.parentElement; }
              return pre; }""")
            out.append(self.shots / f"{name}.tmem.png")
            self.page.screenshot(path=str(out[-1]))
        return out

    def _scroll_to(self, box, target: str) -> None:
        """Scroll the element ``target(box)`` (a JS function) to the top of the window. The notebook lays out the
        cells outside the window lazily (``content-visibility``), so their heights change while it scrolls:
        scroll again until the element stays near the top."""
        for _ in range(20):
            top = box.evaluate(f"""box => {{ const el = ({target})(box); el.scrollIntoView({{block: 'start'}});
                return el.getBoundingClientRect().top; }}""")
            self.page.wait_for_timeout(400)
            now = box.evaluate(f"box => ({target})(box).getBoundingClientRect().top")
            if abs(now - top) < 2 and 0 <= now < 200:
                return


def _saved(lab: JupyterLab, name: str) -> dict:
    """What the saved notebook says: code cells, those that ran, error outputs, the last cell's printed text."""
    nb = json.loads((lab.root / f"{name}.ipynb").read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]

    def text(c):
        return "".join("".join(o.get("text", "")) for o in c["outputs"] if o["output_type"] == "stream")

    errors = [f"cell {i}: {o['ename']}: {o['evalue']}" for i, c in enumerate(code) for o in c["outputs"]
              if o["output_type"] == "error"]
    widget_views = sum(1 for c in code for o in c["outputs"]
                       if "application/vnd.jupyter.widget-view+json" in o.get("data", {}))
    return {"code_cells": len(code), "executed": sum(c.get("execution_count") is not None for c in code),
            "errors": errors, "last_output": text(code[-1]) if code else "",
            "outputs_of_last_cells": [bool(c["outputs"]) for c in code[-3:]], "widget_views": widget_views}


def _run_notebook(tab: Page, name: str, problems: list[str]) -> dict:
    rep = {"open_s": tab.open(name)}
    rep["run_s"] = tab.run_all()
    tab.save(tab.lab.root / f"{name}.ipynb")
    rep.update(_saved(tab.lab, name))
    rep["dom_errors"] = tab.dom_errors()
    if rep["errors"] or rep["dom_errors"]:
        problems.append(f"{name}: error outputs: {rep['errors'] or rep['dom_errors']}")
    if rep["executed"] != rep["code_cells"]:
        problems.append(f"{name}: {rep['executed']} of {rep['code_cells']} code cells ran")
    if LAST_LINE[name] not in rep["last_output"] or not tab.shows(LAST_LINE[name]):
        problems.append(f"{name}: the last cell did not print {LAST_LINE[name]!r} (printed {rep['last_output']!r})")
    if not all(rep["outputs_of_last_cells"]):
        problems.append(f"{name}: one of the last three code cells has no output")
    if rep["widget_views"] < 1:
        problems.append(f"{name}: no widget view was saved in the notebook")
    return rep


def _same_step(name: str, what: str, st: dict, problems: list[str]) -> None:
    if not (st["step"] is not None and st["step"] == st["slider"] == st["event_step"] == st["handle"]):
        problems.append(f"{name}: {what}: status step {st['step']}, slider {st['slider']} (handle {st['handle']}), "
                        f"picture step {st['event_step']} disagree")


def check_03(tab: Page, problems: list[str]) -> dict:
    name = "03_dual_gemm"
    rep = _run_notebook(tab, name, problems)
    box = tab.widget()
    st = tab._settled(box)
    rep["shots"] = [str(p) for p in tab.shoot(box, "03-start")]
    walk = [st]
    _same_step(name, "at the start", st, problems)
    t0 = time.monotonic()
    for i in range(1, 18):
        st = tab.press(box, "next MMA", walk[-1])
        walk.append(st)
        _same_step(name, f"after press {i} of next MMA", st, problems)
        if i == 1:
            rep["shots"] += [str(p) for p in tab.shoot(box, "03-mma-press-1")]
    rep["press_s"] = (time.monotonic() - t0) / 17
    rep["shots"] += [str(p) for p in tab.shoot(box, "03-mma-18th")]
    rep["labels"] = [s["label"] for s in walk]
    rep["kinds"] = sorted({s["kind"] for s in walk})
    rep["steps"] = [s["step"] for s in walk]
    rep["tmem_redrawn"] = [a["tmem_title"] != b["tmem_title"] and b["tmem_title"].startswith(
        f"Tensor Memory at step {b['step']}:") for a, b in itertools.pairwise(walk)]
    rep["tmem_map_changed"] = [a["tmem_map"] != b["tmem_map"] for a, b in itertools.pairwise(walk)]
    rep["p_writer_walk"] = [p_writer(s["tmem_map"]) for s in walk]
    if rep["labels"] != QK_LABELS or rep["kinds"] != ["issue"]:
        problems.append(f"{name}: next MMA walked {rep['labels']} ({rep['kinds']}), not the 18 QK issues {QK_LABELS}")
    if rep["steps"] != sorted(set(rep["steps"])):
        problems.append(f"{name}: the steps do not increase: {rep['steps']}")
    if not all(rep["tmem_redrawn"]):
        problems.append(f"{name}: the Tensor Memory picture was not redrawn after presses "
                        f"{[i + 1 for i, ok in enumerate(rep['tmem_redrawn']) if not ok]}")
    if not any(rep["tmem_map_changed"]):
        problems.append(f"{name}: the Tensor Memory map did not change in 17 presses of next MMA")
    # watch P fill: "go" to the next event of the MMA warp until the 18th instruction completes
    box.locator(".widget-dropdown select").select_option(label="role mma")
    fill = [st]
    for _ in range(40):
        st = tab.press(box, "go ▶▶", fill[-1])
        fill.append(st)
        if st["label"] == QK_LABELS[-1] and st["kind"] == "complete":
            break
    rep["go_presses"] = len(fill) - 1
    rep["completions_seen"] = [s["label"] for s in fill if s["kind"] == "complete"]
    rep["p_writer_final"] = p_writer(st["tmem_map"])
    rep["shots"] += [str(p) for p in tab.shoot(box, "03-qk-k15-complete")]
    if rep["completions_seen"] != QK_LABELS[2:]:
        problems.append(f"{name}: go (role mma) saw completions {rep['completions_seen']}, not QK k=0..15")
    if not (rep["p_writer_final"] or "").endswith(" " + QK_LABELS[-1]):
        problems.append(f"{name}: after QK k=15 completes P's last writer is {rep['p_writer_final']!r}")
    _same_step(name, "after go", st, problems)
    # back one event; then a step typed into the slider's readout moves the model back to the first QK issue
    back = tab.press(box, "◀ back", st)
    rep["back"] = (st["step"], back["step"])
    if back["step"] != st["step"] - 1:
        problems.append(f"{name}: back went from step {st['step']} to {back['step']}")
    typed = tab.type_step(box, walk[0]["step"], back)
    rep["typed"] = (walk[0]["step"], typed["step"], typed["label"])
    if typed["step"] != walk[0]["step"] or typed["label"] != QK_LABELS[0] or typed["tmem_map"] != walk[0]["tmem_map"]:
        problems.append(f"{name}: typing step {walk[0]['step']} into the slider gave step {typed['step']} "
                        f"({typed['label']})")
    _same_step(name, "after typing a step", typed, problems)
    # "MMA lands": from the first QK issue, each press reaches the next MMA completion and P's writer follows it
    lands = [typed]
    for i in range(1, 19):
        lands.append(tab.press(box, "MMA lands", lands[-1]))
        _same_step(name, f"after press {i} of MMA lands", lands[-1], problems)
    rep["lands"] = [(s["label"], s["kind"], p_writer(s["tmem_map"])) for s in lands[1:]]
    if [x[0] for x in rep["lands"]] != QK_LABELS or any(k != "complete" for _, k, _ in rep["lands"]):
        problems.append(f"{name}: MMA lands walked {rep['lands']}, not the 18 QK completions")
    if not all((w or "").endswith(" " + label) for label, _, w in rep["lands"]):
        problems.append(f"{name}: after MMA lands P's last writer did not follow: {rep['lands']}")
    rep["shots"] += [str(p) for p in tab.shoot(box, "03-lands-18th")]
    return rep


def check_04(tab: Page, problems: list[str]) -> dict:
    name = "04_pipeline_timeline"
    rep = _run_notebook(tab, name, problems)
    box = tab.widget()
    st = tab._settled(box)
    _same_step(name, "at the start", st, problems)
    rep["start"] = (st["step"], st["kind"], st["label"])
    moves = []
    for label in ("next ▶", "next ▶", "next ▶", "next completion", "next completion", "next completion", "◀ back"):
        new = tab.press(box, label, st)
        moves.append((label, st["step"], new["step"], new["status"]))
        _same_step(name, f"after {label}", new, problems)
        expect_ok = {"next ▶": new["step"] == st["step"] + 1, "◀ back": new["step"] == st["step"] - 1,
                     "next completion": new["step"] > st["step"] and new["kind"] == "phase"}[label]
        if not expect_ok:
            problems.append(f"{name}: {label} went from step {st['step']} to {new['step']} ({new['status']})")
        st = new
    # the slider itself: its handle moved with the keyboard (one step) and dragged with the mouse (forward)
    tab._scroll_to(box, "el => el")
    for how in ("ArrowRight", "drag"):
        new = tab.slide(box, how, st)
        moves.append((f"slider {how}", st["step"], new["step"], new["status"]))
        _same_step(name, f"after slider {how}", new, problems)
        if not (new["step"] == st["step"] + 1 if how == "ArrowRight" else new["step"] > st["step"]):
            problems.append(f"{name}: slider {how} went from step {st['step']} to {new['step']}")
        st = new
    rep["moves"] = moves
    rep["shots"] = [str(p) for p in tab.shoot(box, "04-after-moves", tmem=False)]
    return rep


def check(command: list[str], shots: Path, notebooks=NOTEBOOKS, browser: str | None = None,
          timeout_s: float = 600, log=print) -> tuple[list[str], dict]:
    """Run the check with JupyterLab started by ``command`` (``[jupyter, "lab"]``); ``(problems, report)``."""
    from playwright.sync_api import sync_playwright

    exe = find_browser(browser or "/usr/bin/chromium") or find_browser()
    shots.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    report: dict = {}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="simtc-jupyterlab-") as tmp:
        work = Path(tmp)
        lab = JupyterLab(command, work)
        with lab:
            report["server_start_s"] = lab.started_s
            log(f"jupyter lab answers at {lab.base} after {lab.started_s:.1f} s")
            with sync_playwright() as pw:
                ctx = pw.chromium.launch_persistent_context(str(work / "chromium-profile"), executable_path=exe,
                                                            headless=True, args=CHROMIUM_ARGS, viewport=VIEWPORT)
                try:
                    ctx.set_default_timeout(timeout_s * 1000)
                    tab = Page(ctx.new_page(), lab, shots, int(timeout_s * 1000))
                    for name in notebooks:
                        t1 = time.monotonic()
                        try:
                            report[name] = {"03_dual_gemm": check_03, "04_pipeline_timeline": check_04}[name](
                                tab, problems)
                        except Exception as exc:  # a wait that timed out, a control not found: say where
                            problems.append(f"{name}: {type(exc).__name__}: {str(exc).splitlines()[0][:400]}")
                            tab.page.screenshot(path=str(shots / f"{name}-failure.png"))
                            report[name] = {"failed": True, "at_failure": tab.cells()}
                        report[name]["total_s"] = time.monotonic() - t1
                        log(f"{name}: {time.monotonic() - t1:.0f} s")
                    report["console_errors"] = tab.console
                    report["dialogs"] = tab.dialogs
                finally:
                    ctx.close()
        report["server_stopped"] = lab.proc.returncode is not None
    report["total_s"] = time.monotonic() - t0
    widget_errors = [c for c in report.get("console_errors", []) if re.search(r"widget|Model|ipywidgets", c)]
    if widget_errors:
        problems.append(f"the browser console reported widget errors: {widget_errors}")
    return problems, report


def summary(report: dict) -> list[str]:
    """A few lines a reader can check against the screenshots."""
    out = [f"jupyter lab answered after {report.get('server_start_s', 0):.1f} s; whole check {report['total_s']:.0f} s"]
    r3 = report.get("03_dual_gemm", {})
    if "labels" in r3:
        out.append(f"03: opened in {r3['open_s']:.1f} s, Run All Cells {r3['run_s']:.1f} s, {r3['executed']}/"
                   f"{r3['code_cells']} code cells ran, {len(r3['errors'])} errors; last cell: "
                   f"{r3['last_output'].strip()!r}")
        out.append(f"03: next MMA x17 ({r3['press_s']:.2f} s a press): {', '.join(r3['labels'])}; steps "
                   f"{r3['steps'][0]}..{r3['steps'][-1]}")
        changed = [i + 1 for i, c in enumerate(r3["tmem_map_changed"]) if c]
        out.append(f"03: TMEM picture redrawn after every press; its map changed after presses {changed} "
                   f"(P's last writer: {r3['p_writer_walk'][0]} -> {r3['p_writer_walk'][-1]}); the writes land at "
                   "completion")
        out.append(f"03: go (role mma) x{r3['go_presses']}: completions {r3['completions_seen'][0]}.."
                   f"{r3['completions_seen'][-1]}; P's last writer {r3['p_writer_final']}; back {r3['back']}; "
                   f"typed step {r3['typed']}")
    r4 = report.get("04_pipeline_timeline", {})
    if "moves" in r4:
        out.append(f"04: Run All Cells {r4['run_s']:.1f} s, {r4['executed']}/{r4['code_cells']} ran, "
                   f"{len(r4['errors'])} errors; widget at {r4['start']}; moves: "
                   + "; ".join(f"{lbl} {a}->{b}" for lbl, a, b, _ in r4["moves"]))
    if report.get("console_errors"):
        out.append(f"browser console errors: {report['console_errors']}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fresh", action="store_true",
                        help="a new venv made by the README's notebook command (else this interpreter's JupyterLab)")
    parser.add_argument("--screenshots", type=Path, help="where screenshots go (default: a new temporary directory)")
    parser.add_argument("--notebook", action="append", choices=NOTEBOOKS, help="default: both")
    parser.add_argument("--browser", help="the Chromium executable (default /usr/bin/chromium, else on PATH)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds any one wait may take (default 600)")
    parser.add_argument("--json", type=Path, help="also write the whole report as JSON here")
    args = parser.parse_args(argv)
    why = missing_requirements(args.browser, fresh=args.fresh)
    if why:
        print(f"cannot check the notebooks in JupyterLab: {why}", file=sys.stderr)
        return 2
    shots = args.screenshots or Path(tempfile.mkdtemp(prefix="simtc-jupyterlab-shots-"))
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="simtc-fresh-venv-") as venv_tmp:
        if args.fresh:
            command = [str(make_fresh_env(Path(venv_tmp) / "venv")), "lab"]
            print(f"fresh environment made by the README's command in {time.monotonic() - t0:.0f} s")
        else:
            command = this_jupyter()
        problems, report = check(command, shots, args.notebook or NOTEBOOKS, args.browser, args.timeout)
    report["setup_s"] = time.monotonic() - t0 - report["total_s"]
    for line in summary(report):
        print(line)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))
    for p in problems:
        print(p, file=sys.stderr)
    print(f"screenshots in {shots}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
