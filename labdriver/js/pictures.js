// Every explorer picture in the page, in any front end (JupyterLab, Notebook 7, Voila): its
// size in pixels, how many frames it has drawn, and `inked` (0 for a blank picture).
() => window.__alBoxes().map((box, b) => {
  const img = window.__alPicture(b);
  return {box: b, width: img.naturalWidth, height: img.naturalHeight,
          draws: (img.__draws || []).length, inked: window.__alInked(img)};
})
