// A page script, installed (before trace.js) in every page before the notebook loads, all on
// performance.now()'s clock: every PNG frame that reaches the page (ipywidgets' Image makes a
// blob URL of each and sets it as its <img>'s src), with the image it went to, so a frame
// still loading can be told from one that is shown; each image's *draws*, the animation
// frame after a frame has loaded and decoded (the picture is on screen from then on); and
// every key press, mouse press, click and input event, with its type (a move's input is the
// event that makes its change: see first_draw_after.js). `__alBoxes` lists the explorers'
// boxes and `__alPicture` one box's picture, for the other scripts, in any front end.
(() => {
  window.__frames = [];  // arrival time of every PNG frame
  window.__images = new Set();  // the <img> elements frames are loaded into
  const src = Object.getOwnPropertyDescriptor(HTMLImageElement.prototype, 'src');
  Object.defineProperty(HTMLImageElement.prototype, 'src', {
    configurable: true,
    get() { return src.get.call(this); },
    set(value) {
      if (typeof value === 'string' && value.startsWith('blob:')) {
        window.__frames.push(performance.now());
        window.__images.add(this);
      }
      src.set.call(this, value);
    },
  });
  document.addEventListener('load', (e) => {
    const img = e.target;
    if (!(img instanceof HTMLImageElement) || !img.src.startsWith('blob:')) return;
    const drawn = () => requestAnimationFrame(() => {
      (img.__draws || (img.__draws = [])).push(performance.now());
      window.dispatchEvent(new Event('al-draw'));  // for next_draw.js, which awaits it
    });
    img.decode().then(drawn, drawn);
  }, true);
  window.__inputs = [];  // {t, type}; input: a <select> changed
  for (const type of ['keydown', 'mousedown', 'click', 'input']) {
    document.addEventListener(type, (e) => window.__inputs.push({t: e.timeStamp, type}), true);
  }
  // An explorer's box holds its controls, its picture (a core ipywidgets Image) and a note.
  window.__alBoxes = () => Array.from(document.querySelectorAll('.al-explorer'))
    .filter((box) => box.querySelector(':scope > img.widget-image'));
  window.__alPicture = (b) => window.__alBoxes()[b].querySelector(':scope > img.widget-image');
  // A picture's pixels (RGBA bytes; null before it has loaded), and `inked`: a count of
  // sampled pixels that are drawn and dark (0 for a blank picture).
  window.__alPixels = (img) => {
    if (!img.complete || !img.naturalWidth) return null;
    const cv = document.createElement('canvas');
    cv.width = img.naturalWidth;
    cv.height = img.naturalHeight;
    const ctx = cv.getContext('2d');
    ctx.drawImage(img, 0, 0);
    return ctx.getImageData(0, 0, cv.width, cv.height).data;
  };
  window.__alInked = (img) => {
    const d = window.__alPixels(img);
    let n = 0;
    if (d) for (let i = 0; i < d.length; i += 4 * 13) if (d[i + 3] > 0 && d[i] < 200) n++;
    return n;
  };
})();
