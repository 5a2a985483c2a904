// Awaits box `b`'s first draw after the first input of one of `types` at or after `since`, and
// resolves with both times (performance.now()'s clock), or null after `timeoutMs`. Nothing
// polls: the page is woken by each draw (init.js's 'al-draw' event). For `NotebookPage.press`,
// a move that leaves the page as little work as can be, when a class shares one machine.
([b, since, types, timeoutMs]) => new Promise((resolve) => {
  const img = window.__alPicture(b);
  const found = () => {
    const first = window.__inputs.find((e) => e.t >= since && types.includes(e.type));
    const draw = first && (img.__draws || []).find((t) => t > first.t);
    return draw === undefined ? null : {input: first.t, draw};
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
