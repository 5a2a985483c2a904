// axe-core's audit of the elements matching `selectors` inside a scrolling container, a view
// at a time. axe tests only what is on screen for some rules (colour contrast reads the
// pixels' stacking), and JupyterLab's notebook scrolls inside its own panel, which clips
// the rest: so the panel (the scroll container around the first match) is scrolled by half
// its height at a time, and each time axe runs on the matches in view. Returns what
// axe_run.js returns, merged: each violation once, with every element it failed on once.
//
// JupyterLab 4.6 wraps its shell in a box of no height with `overflow: hidden`, which clips
// nothing (the shell inside it is positioned absolutely) but which axe takes to clip
// everything: it then finds no text on screen and leaves colour contrast untested. While
// axe runs, such boxes around the matches (of zero height or width) show their overflow,
// which changes no pixel.
async ([selectors, options]) => {
  const first = document.querySelector(selectors.join(', '));
  if (!first) return {violations: [], incomplete: [], passes: 0};
  let scroller = first.parentElement;
  while (scroller && !(scroller.scrollHeight > scroller.clientHeight
         && /(auto|scroll)/.test(getComputedStyle(scroller).overflowY))) {
    scroller = scroller.parentElement;
  }
  scroller = scroller || document.scrollingElement;
  const frame = () => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
  const unclipped = [];
  for (let box = first.parentElement; box; box = box.parentElement) {
    const rect = box.getBoundingClientRect();
    const style = getComputedStyle(box);
    if ((rect.height === 0 || rect.width === 0) && /hidden|clip/.test(style.overflowY + style.overflowX)) {
      unclipped.push([box, box.style.overflow]);
      box.style.overflow = 'visible';
    }
  }
  const violations = new Map();
  const incomplete = new Map();
  let passes = 0;
  const saved = scroller.scrollTop;
  const step = Math.max(100, Math.floor(scroller.clientHeight / 2));
  for (let top = 0; ; top += step) {
    scroller.scrollTop = top;
    await frame();
    const view = scroller.getBoundingClientRect();
    const shown = Array.from(document.querySelectorAll(selectors.join(', '))).filter((el) => {
      const r = el.getBoundingClientRect();
      return r.bottom > view.top && r.top < view.bottom && r.height > 0;
    });
    if (shown.length) {
      const result = await window.axe.run({include: shown}, options);
      passes = Math.max(passes, result.passes.length);
      for (const v of result.violations) {
        const kept = violations.get(v.id) || {id: v.id, impact: v.impact, help: v.help,
                                               tags: v.tags, targets: new Set(), nodes: []};
        for (const n of v.nodes) {
          const target = n.target.join(' ');
          if (kept.targets.has(target)) continue;
          kept.targets.add(target);
          if (kept.nodes.length < 10) {
            kept.nodes.push({target, html: n.html.slice(0, 240),
                             summary: (n.failureSummary || '').slice(0, 400)});
          }
        }
        violations.set(v.id, kept);
      }
      for (const v of result.incomplete) {
        incomplete.set(v.id, (incomplete.get(v.id) || 0) + v.nodes.length);
      }
    }
    if (top + scroller.clientHeight >= scroller.scrollHeight) break;
  }
  scroller.scrollTop = saved;
  for (const [box, overflow] of unclipped) box.style.overflow = overflow;
  return {
    violations: Array.from(violations.values()).map((v) => ({
      id: v.id, impact: v.impact, help: v.help, tags: v.tags, count: v.targets.size,
      nodes: v.nodes, targets: Array.from(v.targets)})),
    incomplete: Array.from(incomplete, ([id, count]) => ({id, count})),
    passes,
  };
}
