// Box `b`'s picture: a hash of its pixels, how many frames it has drawn, its size in pixels.
(b) => {
  const img = window.__alPicture(b);
  const data = window.__alPixels(img);
  let hash = 'empty';
  if (data) {
    let h = 0;
    for (let i = 0; i < data.length; i += 7) h = (h * 31 + data[i]) | 0;
    hash = `${data.length}:${h}`;
  }
  return {hash, draws: (img.__draws || []).length,
          width: img.naturalWidth, height: img.naturalHeight};
}
