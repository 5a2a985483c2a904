// What a screen reader is given for the course's pictures and controls, read from the page.
// `pictures`: every picture in a box of class al-described (an explorer's, an answer's) with
// its alt, its text alternative's text and whether that is a polite live region (role
// status); `box` is the explorer box's index in __alBoxes (-1 for an answer's picture).
// `sliders`: every widget slider handle with the text of the element its aria-labelledby
// names, its aria-valuetext and its readout's text.
() => {
  const boxes = window.__alBoxes();
  const pictures = Array.from(document.querySelectorAll('.al-described')).map((box) => {
    const img = box.querySelector(':scope > img.widget-image');
    const alt = box.querySelector(':scope > .al-alt');
    return {
      box: boxes.indexOf(box),
      shown: !!(img && img.offsetParent),
      alt: img ? img.getAttribute('alt') : null,
      text: alt ? alt.textContent.replace(/\s+/g, ' ').trim() : null,
      role: alt ? alt.getAttribute('role') : null,
      live: alt ? alt.getAttribute('aria-live') : null,
    };
  });
  const sliders = Array.from(document.querySelectorAll('.widget-slider .noUi-handle'))
    .map((handle) => {
      const slider = handle.closest('.widget-slider');
      const named = handle.getAttribute('aria-labelledby');
      const label = named ? document.getElementById(named) : null;
      const readout = slider.querySelector(':scope > .widget-readout');
      return {
        box: boxes.findIndex((b) => b.contains(handle)),
        name: label ? label.textContent.trim() : null,
        valuetext: handle.getAttribute('aria-valuetext'),
        valuenow: handle.getAttribute('aria-valuenow'),
        readout: readout ? readout.textContent.trim() : null,
      };
    });
  return {pictures, sliders};
}
