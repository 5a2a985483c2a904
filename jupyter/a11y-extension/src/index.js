// The course's accessibility plugin: watches the page for core ipywidgets sliders and the
// course's described pictures as they are rendered, and gives them what a screen reader
// needs (./sliders.js, ./pictures.js); and keeps the keys a focused widget control acts on
// from JupyterLab's notebook shortcuts, so the keyboard alone can move them (./keys.js).
//
// It requires no JupyterLab service, so it runs wherever a federated extension loads:
// JupyterLab, Notebook 7 and Voila. Widgets appear whenever an output is rendered (Run All,
// a notebook reopened with saved widget state), so one MutationObserver on the document
// body looks at what is added (and at elements whose classes change: a widget's view may
// add its classes after its children), and each slider or picture found gets small
// observers of its own for the parts that change.

import { keepKeys } from './keys';
import { DESCRIBED, followPicture } from './pictures';
import { SLIDER, followSlider } from './sliders';

const KINDS = [
  [SLIDER, followSlider],
  [DESCRIBED, followPicture],
];

// element -> the parts it was followed with: followed again when a part is replaced
const followed = new WeakMap();

function partsOf(element) {
  return Array.from(element.querySelectorAll('.noUi-handle, .widget-readout, img, .al-alt'));
}

function follow(element, start) {
  const parts = partsOf(element);
  const before = followed.get(element);
  if (before && before.parts.length === parts.length
      && before.parts.every((part, i) => part === parts[i])) {
    return;
  }
  if (before) {
    before.observers.forEach((observer) => observer.disconnect());
  }
  const observers = start(element);
  if (observers.length) {
    followed.set(element, { parts, observers });
  }
}

/** Every slider and described picture at, inside or around ``node``. */
function visit(node) {
  if (!(node instanceof Element)) {
    return;
  }
  for (const [selector, start] of KINDS) {
    const around = node.closest(selector);
    if (around) {
      follow(around, start);
    }
    node.querySelectorAll(selector).forEach((element) => follow(element, start));
  }
}

/** The slider or described picture that ``element`` is or is part of, after a change of its
 * classes (a widget's view may add its classes once it is in the page). */
function visitClassed(element) {
  for (const [selector, start] of KINDS) {
    const around = element.closest(selector);
    if (around) {
      follow(around, start);
    }
  }
}

export function watch(root) {
  visit(root);
  const observer = new MutationObserver((records) => {
    for (const record of records) {
      if (record.type === 'attributes') {
        visitClassed(record.target);
      } else {
        record.addedNodes.forEach(visit);
      }
    }
  });
  observer.observe(root, {
    childList: true, subtree: true, attributes: true, attributeFilter: ['class'],
  });
  return observer;
}

const plugin = {
  id: 'attention-course-a11y:plugin',
  description: 'Names and value texts for widget sliders; text alternatives, announced, for '
    + "the course's explorer pictures; widget controls keep their keys.",
  autoStart: true,
  activate: () => {
    watch(document.body);
    keepKeys(document.body);
  },
};

export default plugin;
