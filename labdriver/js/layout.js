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
    const picture = box.querySelector(':scope > img.widget-image');
    const figure = picture ? picture.getBoundingClientRect() : null;
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
    return {
      box: b, height: rect.height, width: rect.width, cell: area.width,
      figureWidth: figure ? figure.width : null,
      figureRight: figure ? figure.right - area.right : null,
      cutTexts: texts.filter(cut).map((n) => label(n)),
      sliders, toggles,
      // the picture keeps the figure's aspect ratio (0 when it has none yet)
      aspect: picture && picture.naturalWidth && figure.width
        ? (figure.height / figure.width) / (picture.naturalHeight / picture.naturalWidth) : 0,
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
