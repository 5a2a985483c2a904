// The explorers' boxes in the page: controls above a picture (init.js's __alBoxes). Each
// control: its kind, description and whether it can be used; `cell`: the index of the
// notebook cell that holds it (-1 in a page without cells, as Voila's).
() => {
  const boxes = window.__alBoxes();
  const kinds = [['slider', '.widget-hslider'], ['toggle', '.widget-toggle-buttons'],
                 ['checkbox', '.widget-checkbox'], ['dropdown', '.widget-dropdown']];
  const app = window.jupyterapp;
  const panel = app && app.shell && app.shell.currentWidget;
  const cells = panel && panel.content && panel.content.widgets
    ? panel.content.widgets.map((c) => c.node) : [];
  return boxes.map((box, b) => {
    const counts = {};
    const cell = cells.findIndex((node) => node.contains(box));
    return Array.from(box.querySelectorAll(kinds.map(([, s]) => s).join(', '))).map((el) => {
      const kind = kinds.find(([, s]) => el.matches(s))[0];
      const nth = counts[kind] = (counts[kind] === undefined ? 0 : counts[kind] + 1);
      // a checkbox's description is in .widget-label-basic; its .widget-label is a spacer
      const label = Array.from(el.querySelectorAll('.widget-label, .widget-label-basic'))
        .find((n) => n.textContent.replace(/\u200b/g, '').trim() !== '');
      const handle = el.querySelector('.noUi-handle');
      const readout = el.querySelector('.widget-readout');
      const disabled = kind === 'slider'
        ? !!el.querySelector('.noUi-target[disabled]')
        : !!el.querySelector('button:disabled, input:disabled, select:disabled');
      const buttons = Array.from(el.querySelectorAll('button'));
      const options = Array.from(el.querySelectorAll('option'));
      const aria = (name) => handle.getAttribute(`aria-${name}`);
      return {
        box: b, cell, kind, nth,
        description: label ? label.textContent.trim() : '',
        disabled,
        readout: readout ? readout.textContent.trim() : null,
        atMax: handle ? aria('valuenow') === aria('valuemax') : null,
        atMin: handle ? aria('valuenow') === aria('valuemin') : null,
        options: kind === 'toggle' ? buttons.map((x) => x.textContent.trim())
               : kind === 'dropdown' ? options.map((x) => x.textContent.trim())
               : [],
        active: kind === 'toggle' ? buttons.findIndex((x) => x.classList.contains('mod-active'))
              : kind === 'dropdown' ? el.querySelector('select').selectedIndex
              : kind === 'checkbox' ? Number(el.querySelector('input').checked) : null,
      };
    });
  });
}
