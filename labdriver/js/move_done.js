// A move is done when the page sent the control's new value to the kernel, the kernel went
// quiet after it, and the figure's picture drew a frame that arrived after the input.
// (Counting any redraw instead let a late frame of the previous move pass for this one, and
// the test then read the kernel before the change had reached it.)
// Called with state.js's function (stateOf), it returns the predicate the driver waits on,
// called with [box, since].
(stateOf) => ([b, since]) => {
  const state = stateOf(since);
  if (!state.quiet || state.sent === 0) return false;
  const img = window.__alPicture(b);
  const frame = window.__frames.find((t) => t >= since);
  return frame !== undefined && (img.__draws || []).some((t) => t > frame);
}
