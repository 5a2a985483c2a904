// Awaits box `b`'s first draw after the first input of one of `types` at or after `since`, and
// resolves with the move's times on performance.now()'s clock, as first_draw_after.js gives
// them (the input, the arrival of the frame that draw showed, the draw, and
// performance.timeOrigin), or null after `timeoutMs`. Nothing polls: the page is woken by
// each draw (init.js's 'al-draw' event). For `NotebookPage.press`, a move that leaves the
// page as little work as can be, when a class shares one machine.
([b, since, types, timeoutMs]) => new Promise((resolve) => {
  const img = window.__alPicture(b);
  const found = () => {
    const first = window.__inputs.find((e) => e.t >= since && types.includes(e.type));
    const draw = first && (img.__draws || []).find((t) => t > first.t);
    if (draw === undefined) return null;
    const frames = window.__frames.filter((t) => t >= first.t && t <= draw);
    const frame = frames.length ? frames[frames.length - 1] : null;
    return {origin: performance.timeOrigin, input: first.t, frame, draw};
  };
  const done = (result) => {
    window.removeEventListener('al-draw', onDraw);
    clearTimeout(timer);
    resolve(result);
  };
  const onDraw = () => { const times = found(); if (times) done(times); };
  const timer = setTimeout(() => done(found()), timeoutMs);
  window.addEventListener('al-draw', onDraw);
  onDraw();
})
