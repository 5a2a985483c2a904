// Run All is over: the kernel answered every code cell (or one failed) and is quiet.
([since, cells]) => {
  const track = window.__kernel;
  const pending = Array.from(window.__images).filter((img) => !img.complete).length;
  if (track.outstanding.size > 0 || track.kernel.status !== 'idle' || pending > 0) return false;
  if (track.replies.filter((r) => r.at >= since).length >= cells) return true;
  // a cell that failed (and was not tagged to) ends the run early: the test reports it
  const tagged = (c) => (c.model.getMetadata('tags') || []).includes('raises-exception');
  return window.jupyterapp.shell.currentWidget.content.widgets.some(
    (c) => c.model.type === 'code' && !tagged(c)
           && c.model.outputs.toJSON().some((o) => o.output_type === 'error'));
}
