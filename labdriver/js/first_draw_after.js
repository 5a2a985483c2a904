// The first input after `since` of one of `types` (the event that makes the move's change: a
// key press on a slider, the click, that is the release, on a button), box `b`'s first draw
// after it, and the arrival of the frame that draw showed (the last one to reach the page
// before it), all on performance.now()'s clock, with performance.timeOrigin (epoch ms) to put
// the kernel's clock on it; each null where it did not happen.
([b, since, types]) => {
  const img = window.__alPicture(b);
  const first = window.__inputs.find((e) => e.t >= since && types.includes(e.type));
  const input = first === undefined ? undefined : first.t;
  const draw = (img.__draws || []).find((t) => input !== undefined && t > input);
  const frames = window.__frames.filter((t) => input !== undefined && t >= input && t <= draw);
  const frame = draw === undefined ? undefined : frames[frames.length - 1];
  const known = (t) => (t === undefined ? null : t);
  return {origin: performance.timeOrigin, input: known(input), frame: known(frame), draw: known(draw)};
}
