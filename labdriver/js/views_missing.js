// Every widget output of every cell is rendered, and every explorer's picture among them has
// drawn a frame. Returns what is still missing ([] when all is in place).
() => {
  const w = window.jupyterapp.shell.currentWidget;
  const missing = [];
  w.content.widgets.forEach((cell, index) => {
    if (cell.model.type !== 'code') return;
    const wanted = cell.model.outputs.toJSON().filter(
      (o) => o.data && o.data['application/vnd.jupyter.widget-view+json']).length;
    const shown = cell.node.querySelectorAll('.jp-OutputArea-output .jupyter-widgets').length;
    if (shown === 0 && wanted > 0) missing.push(`cell ${index}: widget not rendered`);
    cell.node.querySelectorAll('.al-explorer > img.widget-image').forEach((img) => {
      if (!(img.__draws || []).length || img.naturalWidth === 0) {
        missing.push(`cell ${index}: picture has no frame yet`);
      }
    });
  });
  return missing;
}
