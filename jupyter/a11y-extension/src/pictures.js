// An explorer's picture, for a screen reader: the course puts a picture (a core ipywidgets
// Image, <img class="widget-image">) and its text alternative (an HTML widget of class
// al-alt) side by side in a box of class al-described (attention_course/explorers/base.py).
//
// ipywidgets' Image has no alt: the <img> gets the alternative's text, and the alternative's
// element, which stays while the kernel replaces its content after each move, becomes a
// polite live region, so a screen reader says what a slider did to the picture.

export const DESCRIBED = '.al-described';

/** The box's picture and its alternative, or null while either is not yet rendered. */
function parts(box) {
  const picture = box.querySelector(':scope > img.widget-image');
  const alt = box.querySelector(':scope > .al-alt');
  return picture && alt ? { picture, alt } : null;
}

/** Give the picture its alternative's text as alt, and make the alternative a live region. */
export function describePicture(box) {
  const found = parts(box);
  if (!found) {
    return false;
  }
  const { picture, alt } = found;
  const text = alt.textContent.replace(/\s+/g, ' ').trim();
  if (picture.getAttribute('alt') !== text) {
    picture.setAttribute('alt', text);
  }
  if (alt.getAttribute('role') !== 'status') {
    alt.setAttribute('role', 'status');
    alt.setAttribute('aria-live', 'polite');
    alt.setAttribute('aria-atomic', 'true');
  }
  return true;
}

/** Keep the picture's alt equal to the alternative as the kernel changes it; returns the
 * observer. */
export function followPicture(box) {
  const found = parts(box);
  if (!found) {
    return [];
  }
  const observer = new MutationObserver(() => describePicture(box));
  observer.observe(found.alt, { childList: true, characterData: true, subtree: true });
  describePicture(box);
  return [observer];
}
