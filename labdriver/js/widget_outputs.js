// Every output that holds a widget view, as the page shows it: text, pictures, errors.
() => {
  const w = window.jupyterapp.shell.currentWidget;
  const mime = 'application/vnd.jupyter.widget-view+json';
  const shown = (n) => n.offsetParent !== null && n.getBoundingClientRect().width > 0;
  const out = [];
  w.content.widgets.forEach((c, index) => {
    if (c.model.type !== 'code') return;
    c.model.outputs.toJSON().forEach((o, k) => {
      if (!(o.data && o.data[mime])) return;
      const node = c.node.querySelectorAll('.jp-OutputArea-output')[k];
      if (!node) { out.push({cell: index, missing: true}); return; }
      const canvases = Array.from(
        node.querySelectorAll('.jupyter-matplotlib-canvas-div canvas:first-child')).filter(shown);
      out.push({
        cell: index,
        model: o.data[mime].model_id,
        trusted: !!c.model.trusted,
        text: node.innerText,
        images: Array.from(node.querySelectorAll('img')).filter(shown).map((i) => ({
          width: i.getBoundingClientRect().width, natural: i.naturalWidth, complete: i.complete})),
        canvases: canvases.map((cv) => {
          let inked = 0;
          if (cv.width && cv.height) {
            const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
            for (let i = 0; i < d.length; i += 4 * 13) if (d[i + 3] > 0 && d[i] < 200) inked++;
          }
          return {width: cv.width, height: cv.height, inked, trace: window.__traceId(cv)};
        }),
        explorer: !!node.querySelector('.al-explorer'),
        still: !!node.querySelector('.al-still'),
      });
    });
  });
  return out;
}
