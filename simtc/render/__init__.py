"""Views of simtc's models for the terminal, Jupyter and SVG (rich renderables).

Views are imported lazily from their modules; this package only re-exports helpers.
"""

from simtc.render.export import make_console, print_view, to_svg, to_text

__all__ = ["make_console", "print_view", "to_svg", "to_text"]
