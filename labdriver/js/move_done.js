// A move is done when the page sent the control's new value to the kernel, the kernel went
// quiet after it, and the figure's canvas painted a frame that arrived after the input.
// (Counting any redraw of the canvas instead let a late frame of the previous move pass
// for this one, and the test then read the kernel before the change had reached it.)
// Called with state.js's function (stateOf), it returns the predicate the driver waits on,
// called with [box, since].
(stateOf) => ([b, since]) => {
  const state = stateOf(since);
  if (!state.quiet || state.sent === 0) return false;
  const boxes = Array.from(document.querySelectorAll('.jp-Notebook .widget-vbox'))
    .filter((x) => Array.from(x.children).some((c) => c.classList.contains('jupyter-matplotlib')));
  const canvas = boxes[b].querySelector('.jupyter-matplotlib-canvas-div canvas');
  const frame = window.__frames.find((t) => t >= since);
  return frame !== undefined && (canvas.__draws || []).some((t) => t > frame);
}
