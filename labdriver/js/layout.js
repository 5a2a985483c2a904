// The layout of every explorer box and every other picture in the notebook's outputs.
() => {
  const shown = (n) => n.offsetParent !== null && n.getBoundingClientRect().width > 0
    && getComputedStyle(n).visibility !== 'hidden';
  const cut = (n) => n.scrollWidth > n.clientWidth + 1;
  const label = (n) => n.textContent.replace(/\u200b/g, '').trim();
  const boxes = Array.from(document.querySelectorAll('.jp-Notebook .al-explorer')).filter(shown);
  const explorers = boxes.map((box, b) => {
    const area = box.closest('.jp-OutputArea-output').getBoundingClientRect();
    const rect = box.getBoundingClientRect();
    const canvasDiv = box.querySelector('.jupyter-matplotlib-canvas-div');
    const figure = canvasDiv ? canvasDiv.getBoundingClientRect() : null;
    const texts = Array.from(box.querySelectorAll(
      '.al-controls .widget-label, .al-controls .widget-label-basic, .al-controls button, ' +
      '.al-controls .widget-readout, .al-controls select'))
      .filter(shown).filter((n) => label(n) !== '');
    const sliders = Array.from(box.querySelectorAll('.al-controls .slider-container')).filter(shown)
      .map((s) => ({label: label(s.closest('.widget-slider').querySelector('.widget-label')),
                    width: s.getBoundingClientRect().width}));
    const toggles = Array.from(box.querySelectorAll('.al-controls .widget-toggle-buttons'))
      .filter(shown).map((t) => {
        const tops = Array.from(t.querySelectorAll('button'))
          .map((x) => Math.round(x.getBoundingClientRect().top));
        return {label: label(t.querySelector('.widget-label')), rows: new Set(tops).size};
      });
    const header = box.querySelector('.jupyter-matplotlib-header');
    const toolbar = box.querySelector('.jupyter-matplotlib-toolbar');
    const top = box.querySelector('.jupyter-matplotlib-canvas-div canvas:nth-child(2)');
    let handle = 0;
    if (top && top.width > 20 && top.height > 20) {
      const d = top.getContext('2d').getImageData(top.width - 20, top.height - 20, 20, 20).data;
      for (let i = 3; i < d.length; i += 4) if (d[i] > 0) handle++;
    }
    return {
      box: b, height: rect.height, width: rect.width, cell: area.width,
      figureWidth: figure ? figure.width : null,
      figureRight: figure ? figure.right - area.right : null,
      cutTexts: texts.filter(cut).map((n) => label(n)),
      sliders, toggles,
      header: !!header && shown(header), toolbar: !!toolbar && shown(toolbar), handle,
    };
  });
  const overflowing = Array.from(document.querySelectorAll('.jp-Notebook .jp-OutputArea-output'))
    .filter(shown).filter((o) => o.scrollWidth > o.clientWidth + 1)
    .map((o) => ({width: o.clientWidth, content: o.scrollWidth, text: o.innerText.slice(0, 80)}));
  const pictures = Array.from(document.querySelectorAll(
    '.jp-Notebook .jp-OutputArea-output img, .jp-Notebook .jp-OutputArea-output canvas'))
    .filter(shown).map((n) => {
      const area = n.closest('.jp-OutputArea-output').getBoundingClientRect();
      const r = n.getBoundingClientRect();
      return {tag: n.tagName, width: r.width, right: r.right - area.right};
    });
  const panel = document.querySelector('.jp-NotebookPanel-notebook').getBoundingClientRect();
  return {explorers, overflowing, pictures, notebookHeight: panel.height};
}
