// The concept pages: mark each notebook output whose picture is wider than its frame (the frame then scrolls
// sideways) so that the note under it shows; the static mark docs/scripts/notebooks.py sets from the picture's
// width in characters is corrected here for the window's actual width, on load, on every page Material's
// instant navigation shows, and when the window is resized.
(function () {
  function mark() {
    document.querySelectorAll(".nb-output.nb-scroll").forEach(function (frame) {
      var pic = frame.querySelector("pre") || frame;
      frame.classList.toggle("nb-wide", pic.scrollWidth > pic.clientWidth + 1);
    });
  }
  if (typeof document$ !== "undefined") {
    document$.subscribe(mark);
  } else {
    document.addEventListener("DOMContentLoaded", mark);
  }
  window.addEventListener("resize", mark);
})();
