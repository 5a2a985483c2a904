// Box `b`'s picture: a hash of its pixels, how many frames it has drawn, its size in pixels.
(b) => {
  const img = window.__alPicture(b);
  let hash = 'empty';
  if (img.complete && img.naturalWidth > 0) {
    const cv = document.createElement('canvas');
    cv.width = img.naturalWidth;
    cv.height = img.naturalHeight;
    const ctx = cv.getContext('2d');
    ctx.drawImage(img, 0, 0);
    const data = ctx.getImageData(0, 0, cv.width, cv.height).data;
    let h = 0;
    for (let i = 0; i < data.length; i += 7) h = (h * 31 + data[i]) | 0;
    hash = `${data.length}:${h}`;
  }
  return {hash, draws: (img.__draws || []).length,
          width: img.naturalWidth, height: img.naturalHeight};
}
