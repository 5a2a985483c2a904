// Every output that holds a widget view, as the page shows it: text, pictures, errors.
// `pictures`: the explorers' live or saved pictures (core Image widgets) with their size and
// `inked`, a count of sampled pixels that are drawn and dark (0 for a blank picture).
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
      const pictures = Array.from(node.querySelectorAll('.al-explorer > img.widget-image'))
        .filter(shown);
      out.push({
        cell: index,
        model: o.data[mime].model_id,
        trusted: !!c.model.trusted,
        text: node.innerText,
        images: Array.from(node.querySelectorAll('img')).filter(shown).map((i) => ({
          width: i.getBoundingClientRect().width, natural: i.naturalWidth, complete: i.complete})),
        pictures: pictures.map((img) => ({
          width: img.naturalWidth, height: img.naturalHeight, inked: window.__alInked(img),
          trace: window.__traceId(img)})),
        controlsShown: Array.from(node.querySelectorAll('.al-controls')).some(shown),
        explorer: !!node.querySelector('.al-explorer'),
        still: !!node.querySelector('.al-still'),
      });
    });
  });
  return out;
}
