// The element that has the keyboard's focus: its tag, role, class and text, and `box`/`kind`,
// the explorer box (index in __alBoxes, -1 if none) and the control it belongs to, with the
// control's index among that box's controls of its kind (`nth`, as controls.js counts them),
// and whether that control is disabled (a scale's c while the rule is not "custom").
() => {
  const el = document.activeElement;
  const kinds = [['slider', '.widget-hslider'], ['toggle', '.widget-toggle-buttons'],
                 ['checkbox', '.widget-checkbox'], ['dropdown', '.widget-dropdown']];
  const boxes = window.__alBoxes();
  const b = boxes.findIndex((box) => box.contains(el));
  let kind = null;
  let nth = -1;
  for (const [name, selector] of kinds) {
    const control = el.closest(selector);
    if (control && b >= 0) {
      kind = name;
      nth = Array.from(boxes[b].querySelectorAll(selector)).indexOf(control);
      break;
    }
  }
  return {
    tag: el.tagName.toLowerCase(), role: el.getAttribute('role'),
    cls: String(el.className || ''), text: (el.textContent || '').trim().slice(0, 60),
    box: b, kind, nth, handle: el.classList.contains('noUi-handle'),
    active: el.classList.contains('mod-active'),
    disabled: !!(el.disabled || el.closest('.noUi-target[disabled]')),
  };
}
