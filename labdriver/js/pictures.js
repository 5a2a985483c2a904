// Every explorer picture in the page, in any front end (JupyterLab, Notebook 7, Voila): its
// size in pixels, how many frames it has drawn, and `inked`, a count of sampled pixels that
// are drawn and dark (0 for a blank picture).
() => window.__alBoxes().map((box, b) => {
  const img = window.__alPicture(b);
  let inked = 0;
  if (img.complete && img.naturalWidth > 0) {
    const cv = document.createElement('canvas');
    cv.width = img.naturalWidth;
    cv.height = img.naturalHeight;
    const ctx = cv.getContext('2d');
    ctx.drawImage(img, 0, 0);
    const d = ctx.getImageData(0, 0, cv.width, cv.height).data;
    for (let i = 0; i < d.length; i += 4 * 13) if (d[i + 3] > 0 && d[i] < 200) inked++;
  }
  return {box: b, width: img.naturalWidth, height: img.naturalHeight,
          draws: (img.__draws || []).length, inked};
})
