// A page script, installed (before trace.js) in every page before JupyterLab loads, all on
// performance.now()'s clock: every drawImage on every canvas (ipympl paints each new frame
// with drawImage); every PNG frame that reaches the page (ipympl makes a blob URL of each
// and loads it into an <img>), with the image it went to, so a frame still being decoded
// can be told from one that is painted; and every key press, mouse press, click and input
// event, with its type (a move's input is the event that makes its change: see
// first_draw_after.js).
(() => {
  const draw = CanvasRenderingContext2D.prototype.drawImage;
  CanvasRenderingContext2D.prototype.drawImage = function (...args) {
    const c = this.canvas;
    (c.__draws || (c.__draws = [])).push(performance.now());
    return draw.apply(this, args);
  };
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
  window.__inputs = [];  // {t, type}; input: a <select> changed
  for (const type of ['keydown', 'mousedown', 'click', 'input']) {
    document.addEventListener(type, (e) => window.__inputs.push({t: e.timeStamp, type}), true);
  }
})();
