// The keys a widget control moves itself with stay with it.
//
// JupyterLab's notebook shortcuts in command mode take keys pressed anywhere in a notebook
// but in an editable field (":read-write"), after the focused element has had them: ArrowDown
// on a focused dropdown (<select>) changes its option and also moves the notebook to the
// next cell, taking the focus away; Enter on a focused toggle button clicks it and also puts
// the cell into edit mode. A learner on the keyboard could not use a dropdown at all. So a
// key that a focused widget control acts on, pressed without a modifier, goes no further than
// the page's body: the control still acts on it (its default action and its own listeners
// come first), JupyterLab's shortcuts (on the document, bubbling) do not. Every other key,
// Tab and Escape and any shortcut with Ctrl, Alt or Meta included, reaches JupyterLab as
// before.

const MOVES = ['ArrowLeft', 'ArrowRight', 'ArrowUp', 'ArrowDown', 'Home', 'End', 'PageUp',
  'PageDown'];
const PRESSES = [' ', 'Enter'];

/** Per kind of control inside a widget's view: the keys it acts on. */
export const KEPT = [
  ['.noUi-handle', MOVES],
  ['select', [...MOVES, ...PRESSES]],
  ['button, input[type="checkbox"], input[type="radio"]', PRESSES],
];

/** Whether ``event`` is a key that its focused widget control acts on. */
export function isControlKey(event) {
  if (event.ctrlKey || event.altKey || event.metaKey) {
    return false;
  }
  const target = event.target;
  if (!(target instanceof Element) || !target.closest('.jupyter-widgets')) {
    return false;
  }
  return KEPT.some(([selector, keys]) => target.matches(selector) && keys.includes(event.key));
}

/** Keep widget controls' keys below ``root`` (the body: JupyterLab listens on the document). */
export function keepKeys(root) {
  const listener = (event) => {
    if (isControlKey(event)) {
      event.stopPropagation();
    }
  };
  root.addEventListener('keydown', listener);
  return listener;
}
