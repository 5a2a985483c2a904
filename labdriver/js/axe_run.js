// axe-core's audit of part of the page (axe must be in the page: a11y.py puts it there):
// `context` is axe's (selectors to include and exclude), `options` its run options. Returns
// each violation with its impact, its rule's help and tags, and up to ten of its elements
// (their CSS path, their HTML cut short and axe's summary of what fails), and how many
// elements axe could not decide on (`incomplete`).
async ([context, options]) => {
  const result = await window.axe.run(context, options);
  return {
    violations: result.violations.map((v) => ({
      id: v.id, impact: v.impact, help: v.help, tags: v.tags, count: v.nodes.length,
      nodes: v.nodes.slice(0, 10).map((n) => ({
        target: n.target.join(' '), html: n.html.slice(0, 240),
        summary: (n.failureSummary || '').slice(0, 400),
      })),
    })),
    incomplete: result.incomplete.map((v) => ({id: v.id, count: v.nodes.length})),
    passes: result.passes.length,
  };
}
