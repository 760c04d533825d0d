"""Step through a run in Jupyter: a slider, buttons and the picture of the current step, updated on every move.

:class:`StepperWidget` puts a :class:`simtc.engine.stepper.Stepper` behind a few controls -- a slider over the
steps (0 .. the number of events), back / next, the next barrier completion, the next MMA issue, the next MMA
completion (when its D lands in TMEM), and a jump to
the next event of a chosen role or barrier -- and shows, after every move, the :class:`~simtc.render.step.StepView`
of the step: the event with its PTX line, what it read and wrote and whom it released, the warps, the barriers,
Tensor Memory coloured by last writer, the shared-memory buffers, and the whole run's timeline with a cursor at
the step's cycle.

**Why ipywidgets (and not anywidget).** Every picture is rendered by rich on the Python side, to HTML with inline
styles; the front end only has to show an HTML string and a slider and some buttons. ipywidgets has those
controls, and its front end ships with JupyterLab (the ``jupyterlab_widgets`` package ipywidgets depends on), so
no front-end code is written or built here; a notebook saved with its widget state keeps the controls and the
last picture. anywidget would need the controls written by hand in JavaScript for no gain.

**Without a live front end.** The widget is also a plain Python model -- :attr:`StepperWidget.step`,
:meth:`~StepperWidget.next`, :meth:`~StepperWidget.back`, :meth:`~StepperWidget.goto`, :meth:`~StepperWidget.html`
-- that works with ipywidgets absent (then :attr:`~StepperWidget.widget` is None). Displayed, it offers the
current step's picture as ``text/html`` beside the widget view, so a notebook page built without a live kernel
(nbconvert, the documentation site) shows that picture. :func:`show_steps` (or :meth:`StepperWidget.static`) is
the static stand-in for stepping: one rich renderable with the pictures of chosen steps, one after another.

>>> from simtc.engine.stepper import Stepper
>>> from simtc.kernels.hazards import build
>>> w = StepperWidget(Stepper.for_program(build("hazard/ld-before-commit-fixed"), mode="timing"), timeline=False)
>>> _ = w.next(); w.step
1
>>> w.stepper.event().ptx in w.html()
True
"""

from __future__ import annotations

import html as _html
import importlib.util
import io

from rich.console import Console, ConsoleOptions, RenderResult
from rich.jupyter import JupyterMixin
from rich.rule import Rule
from rich.text import Text

from simtc.errors import SimtcError
from simtc.render.step import StepView
from simtc.render.theme import SIMTC_THEME, style

__all__ = ["MMA_OPCODES", "StepperWidget", "StepsView", "WidgetError", "have_ipywidgets", "show_steps", "to_html"]

MMA_OPCODES = ("tcgen05.mma", "wgmma.mma_async")
"""PTX opcodes (prefixes of the PTX line) the "next MMA" control stops at."""

HTML_FORMAT = ('<pre style="white-space:pre;overflow-x:auto;line-height:normal;'
               "font-family:Menlo,'DejaVu Sans Mono',consolas,'Courier New',monospace\">{code}</pre>")
"""The HTML around a rendered picture (the same ``<pre>`` rich uses for Jupyter output)."""


class WidgetError(SimtcError, RuntimeError):
    """A control pressed that the widget does not have (ipywidgets absent, an unknown control or target)."""


def have_ipywidgets() -> bool:
    """ipywidgets can be imported (the interactive controls are available)."""
    return importlib.util.find_spec("ipywidgets") is not None


def to_html(renderable, width: int = 120) -> str:
    """A rich renderable as HTML with inline styles (a ``<pre>`` block), at ``width`` characters."""
    console = Console(theme=SIMTC_THEME, width=width, record=True, file=io.StringIO(), force_jupyter=False,
                      force_terminal=False, color_system="truecolor")
    console.print(renderable)
    return console.export_html(inline_styles=True, code_format=HTML_FORMAT)


class StepsView(JupyterMixin):
    """The pictures of chosen steps of a stepper, one after another (see :func:`show_steps`).

    Rendering runs the stepper to its end, moves it to each step and back to where it was.
    """

    def __init__(self, stepper, steps, *, timeline: bool = True, tmem: bool = True, smem: bool = True):
        self.s = stepper
        self.steps = [(int(x), None) if not isinstance(x, tuple) else (int(x[0]), str(x[1])) for x in steps]
        self.timeline, self.tmem, self.smem = timeline, tmem, smem

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        s = self.s
        saved = s.position
        len(s)  # the whole run: each picture says "step n of N"
        try:
            for n, caption in self.steps:
                s.goto(n)
                e = s.event()
                title = f"step {n}" + (f": {caption}" if caption else "") + (f" (cycle {e.cycle})" if e else "")
                yield Rule(Text(title, style=style("simtc.title")), align="left")
                # rendered now, while the stepper is at step n
                yield from list(console.render(StepView(s, timeline=self.timeline, tmem=self.tmem,
                                                        smem=self.smem), options))
        finally:
            s.goto(saved)


def show_steps(stepper, steps, *, timeline: bool = True, tmem: bool = True, smem: bool = True) -> StepsView:
    """The static pictures of ``steps`` (each a step number, or ``(step, caption)``) of ``stepper``: a rich
    renderable (HTML in Jupyter, text in a terminal) to show where the interactive widget cannot run."""
    return StepsView(stepper, steps, timeline=timeline, tmem=tmem, smem=smem)


class _StaticMethod:
    """``StepperWidget.static(stepper, steps)`` on the class, ``widget.static(steps)`` on an instance."""

    def __get__(self, obj, cls):
        if obj is None:
            return show_steps

        def static(steps, **options):
            opts = {"timeline": obj.timeline, "tmem": obj.tmem, "smem": obj.smem, **options}
            return show_steps(obj.stepper, steps, **opts)

        static.__doc__ = show_steps.__doc__
        return static


class StepperWidget:
    """An interactive stepping widget over ``stepper`` (see the module text), starting at step ``start``.

    ``timeline``, ``tmem``, ``smem``: the parts of the picture beside the event, warps and barriers; ``width``: the
    picture's width in characters (115, the width rich gives its views in Jupyter). The run is completed at once
    (the slider needs its length). Displayed, it offers beside the widget the picture of the step it is at when
    it is displayed (``text/html``), for pages built without a live kernel.
    """

    static = _StaticMethod()

    def __init__(self, stepper, *, start: int = 0, timeline: bool = True, tmem: bool = True, smem: bool = True,
                 width: int = 115):
        self.stepper = stepper
        self.timeline, self.tmem, self.smem, self.width = timeline, tmem, smem, width
        self.total = len(stepper)
        stepper.goto(start)
        self.message = ""
        """What the last move said when it could not move (no further event of that kind)."""
        self._html: tuple[int, str] | None = None
        self._syncing = False
        self.widget = None
        """The ipywidgets box (None when ipywidgets is not installed)."""
        self.slider = None
        self._controls: dict = {}
        if have_ipywidgets():
            self._build()

    # ------------------------------------------------------------------ the model
    @property
    def step(self) -> int:
        """The current step (0 = before the first event)."""
        return self.stepper.position

    @step.setter
    def step(self, n: int) -> None:
        self.goto(n)

    def event(self):
        """The event that led to the current step (None at step 0)."""
        return self.stepper.event()

    def goto(self, n: int):
        """Go to step ``n``; returns the state there (a step outside the run raises StepError)."""
        state = self.stepper.goto(n)
        self._moved("")
        return state

    def next(self, n: int = 1):
        """``n`` events forward (stops at the end); returns the event now current."""
        e = self.stepper.forward(n)
        self._moved("" if e is not None else "at the end of the run")
        return self.stepper.event()

    def back(self, n: int = 1):
        """``n`` events back (stops at step 0); returns the event now current."""
        e = self.stepper.back(n)
        self._moved("")
        return e

    def to_next(self, **conditions):
        """Go to the next event matching :meth:`simtc.engine.stepper.Stepper.find`'s conditions (``role``,
        ``warp``, ``barrier``, ``opcode``, ``kind``, ``cycle``, ``label``); None and no move when there is none."""
        e = self.stepper.to_next(**conditions)
        what = ", ".join(f"{k} {v}" for k, v in conditions.items())
        self._moved("" if e is not None else f"no further event with {what}")
        return e

    def next_completion(self):
        """Go to the next barrier completion (an mbarrier phase, a named barrier's release)."""
        return self.to_next(kind="phase")

    def next_mma(self, kind: str = "issue"):
        """Go to the next MMA issue (``tcgen05.mma`` or ``wgmma.mma_async``; ``kind="complete"``: the next MMA
        that completes, when its result lands in TMEM); None and no move when there is none."""
        found = [n for op in MMA_OPCODES if (n := self.stepper.find(opcode=op, kind=kind)) is not None]
        if not found:
            self._moved("no further MMA " + ("issue" if kind == "issue" else "completion"))
            return None
        self.stepper.goto(min(found))
        self._moved("")
        return self.stepper.event()

    def next_mma_lands(self):
        """Go to the next MMA completion: the step at which its D lands in TMEM (the TMEM picture changes)."""
        return self.next_mma("complete")

    def view(self) -> StepView:
        """The picture of the current step (a rich renderable)."""
        return StepView(self.stepper, timeline=self.timeline, tmem=self.tmem, smem=self.smem)

    def html(self) -> str:
        """The current step's picture as HTML (what the widget shows)."""
        pos = self.stepper.position
        if self._html is None or self._html[0] != pos:
            self._html = (pos, to_html(self.view(), self.width))
        return self._html[1]

    def status(self) -> str:
        """One line: the step, the cycle, who did what (and what the last move could not do)."""
        e = self.stepper.event()
        what = "" if e is None else f"{e.who} {e.kind}" if e.role else e.detail
        where = (f"step {self.step} of {self.total}" +
                 (f" · cycle {e.cycle} · {what}" if e is not None else " · before the first event"))
        return where + (f" · {self.message}" if self.message else "")

    def targets(self) -> list[tuple[str, dict]]:
        """The jump targets offered: each role, then each barrier the run uses (mbarriers in their declaration
        order, then the named barriers by id)."""
        roles = list(dict.fromkeys(w.role for w in self.stepper.engine.warps))
        used = {e.barrier for e in self.stepper.events if e.barrier}
        mbars = [b for b in self.stepper.engine.mbars if b in used]
        bars = mbars + sorted(used.difference(mbars), key=lambda b: (len(b), b))  # then the named barriers
        return ([(f"role {r}", {"role": r}) for r in roles] +
                [(f"barrier {b}", {"barrier": b}) for b in bars])

    # ------------------------------------------------------------------ the controls
    def _build(self) -> None:
        import ipywidgets as W

        slider = W.IntSlider(value=self.step, min=0, max=self.total, description="step", continuous_update=False,
                             layout=W.Layout(width="100%"))
        buttons = {
            "back": W.Button(description="◀ back", tooltip="one event back"),
            "next": W.Button(description="next ▶", tooltip="one event forward"),
            "completion": W.Button(description="next completion", tooltip="the next barrier completion "
                                   "(an mbarrier phase, a named barrier's release)"),
            "mma": W.Button(description="next MMA", tooltip="the next tcgen05.mma / wgmma.mma_async issue"),
            "lands": W.Button(description="MMA lands", tooltip="the next MMA completion: its D lands in TMEM"),
        }
        target = W.Dropdown(options=[(name, i) for i, (name, _) in enumerate(self.targets())],
                            description="next event of", style={"description_width": "initial"})
        jump = W.Button(description="go ▶▶", tooltip="forward to the next event of the chosen role or barrier")
        status = W.Label(value=self.status())
        picture = W.HTML(value=self.html())
        slider.observe(self._on_slider, names="value")
        buttons["back"].on_click(lambda _b: self.back())
        buttons["next"].on_click(lambda _b: self.next())
        buttons["completion"].on_click(lambda _b: self.next_completion())
        buttons["mma"].on_click(lambda _b: self.next_mma())
        buttons["lands"].on_click(lambda _b: self.next_mma_lands())
        jump.on_click(lambda _b: self.to_next(**self.targets()[target.value][1]))
        self.slider = slider
        self._controls = {**buttons, "target": target, "jump": jump, "status": status, "picture": picture}
        self.widget = W.VBox([slider, W.HBox([*buttons.values(), target, jump]), status, picture])

    def _on_slider(self, change) -> None:
        if not self._syncing:
            self.goto(change["new"])

    def _moved(self, message: str) -> None:
        """After a move: the slider follows the stepper, the picture and the status line are redrawn."""
        self.message = message
        if self.widget is None:
            return
        self._syncing = True
        try:
            self.slider.value = self.step
        finally:
            self._syncing = False
        self._controls["status"].value = self.status()
        self._controls["picture"].value = self.html()

    def click(self, name: str) -> None:
        """Press a control by name (``back``, ``next``, ``completion``, ``mma``, ``lands``, ``jump``), as a user
        would."""
        if self.widget is None:
            raise WidgetError("ipywidgets is not installed: no controls to press", rule="the controls need ipywidgets")
        if name not in ("back", "next", "completion", "mma", "lands", "jump"):
            raise WidgetError(f"no control {name!r}; the controls are back, next, completion, mma, lands, jump",
                              rule="StepperWidget controls")
        self._controls[name].click()

    def select(self, target: str) -> None:
        """Choose the jump target by its name (``"role mma"``, ``"barrier qk_done[0]"``) in the dropdown."""
        names = [name for name, _ in self.targets()]
        if self.widget is None:
            raise WidgetError("ipywidgets is not installed: no dropdown", rule="the controls need ipywidgets")
        if target not in names:
            raise WidgetError(f"no jump target {target!r}; the targets are {', '.join(names)}",
                              rule="jump targets are the run's roles and barriers")
        self._controls["target"].value = names.index(target)

    # ------------------------------------------------------------------ display
    def _repr_mimebundle_(self, **kwargs) -> dict:
        bundle = {"text/plain": repr(self), "text/html": self.html()}
        if self.widget is not None:
            bundle.update(self.widget._repr_mimebundle_(**kwargs) or {})
            bundle["text/plain"] = repr(self)
        else:
            note = ("ipywidgets is not installed (pip install ipywidgets, or the notebooks extra): the picture of "
                    f"step {self.step}, not the interactive widget")
            bundle["text/html"] = f"<p><i>{_html.escape(note)}</i></p>" + bundle["text/html"]
        return bundle

    def __repr__(self) -> str:
        return f"StepperWidget({self.stepper.title!r}: {self.status()})"
