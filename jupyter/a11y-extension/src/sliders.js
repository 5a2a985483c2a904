// A core ipywidgets slider, for a screen reader: its handle (role="slider", from noUiSlider)
// is named by the slider's description label and reads the value its readout shows.
//
// ipywidgets 8 gives the handle neither: a screen reader says "slider" and the position on
// noUiSlider's own scale, which for a log-scale slider (FloatLogSlider) is the exponent, so
// a readout of "1.00" is read as "0". The readout is the value as the learner sees it
// (the slider's readout_format), so aria-valuetext follows it.

export const SLIDER = '.widget-slider';

let made = 0;

/** The element's id, given one first if it has none. */
function idOf(element) {
  if (!element.id) {
    made += 1;
    element.id = `al-a11y-${made}`;
  }
  return element.id;
}

/** The slider's parts, or null while it is not yet rendered. */
function parts(slider) {
  const handle = slider.querySelector('.noUi-handle');
  if (!handle) {
    return null;
  }
  return {
    handle,
    label: slider.querySelector(':scope > .widget-label'),
    readout: slider.querySelector(':scope > .widget-readout'),
  };
}

/** Set an attribute only where it differs (each set is a mutation the observers see). */
function setAttribute(element, name, value) {
  if (element.getAttribute(name) !== value) {
    element.setAttribute(name, value);
  }
}

/** Name the handle by the label, and make its value text the readout's. */
export function describeSlider(slider) {
  const found = parts(slider);
  if (!found) {
    return false;
  }
  const { handle, label, readout } = found;
  if (label && label.textContent.trim()) {
    setAttribute(handle, 'aria-labelledby', idOf(label));
    if (readout) {
      // the readout is an editable field (contenteditable): a text box with the same name
      setAttribute(readout, 'role', 'textbox');
      setAttribute(readout, 'aria-labelledby', idOf(label));
    }
  }
  if (readout) {
    setAttribute(handle, 'aria-valuetext', readout.textContent.trim());
  }
  return true;
}

/** Keep the handle's value text equal to the readout as either changes; returns the
 * observers (their elements live as long as the slider's view). */
export function followSlider(slider) {
  const found = parts(slider);
  if (!found) {
    return [];
  }
  const update = () => describeSlider(slider);
  const observers = [];
  if (found.readout) {
    const readout = new MutationObserver(update);
    readout.observe(found.readout, { childList: true, characterData: true, subtree: true });
    observers.push(readout);
  }
  // noUiSlider writes its own aria-valuetext on every move: put the readout's back
  const handle = new MutationObserver(update);
  handle.observe(found.handle, { attributes: true, attributeFilter: ['aria-valuetext'] });
  observers.push(handle);
  if (found.label) {
    const label = new MutationObserver(update);
    label.observe(found.label, { childList: true, characterData: true, subtree: true });
    observers.push(label);
  }
  update();
  return observers;
}
