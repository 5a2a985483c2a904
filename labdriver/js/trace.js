// A page script, the frame trace, installed after init.js: in order, on performance.now()'s
// clock, every step a picture takes on its way to an explorer's canvas, so a canvas left
// blank can be followed back to its frames (labdriver.frame_trace). ipympl's page keeps,
// per figure, one <img> that frames are decoded into and one offscreen canvas that the
// decoded frame is drawn on; each view's canvas copies the offscreen one. Logged: a blob
// URL made (its byte count matches the binary message it came from), an <img> given a
// frame and the frame loaded (or failed), a canvas resized (which clears it) or cleared,
// and every drawImage (destination canvas, source image or canvas, and whether that source
// had finished loading). The kernel's messages join the same log in track_kernel.js.
(() => {
  const trace = window.__trace = [];
  let ids = 0;
  const id = (el) => el.__tid || (el.__tid = `${el.tagName === 'IMG' ? 'img' : 'cv'}${++ids}`);
  const log = (e, fields) => {
    if (trace.length < 200000) trace.push({t: performance.now(), e, ...fields});
  };
  window.__traceId = id;
  const blobUrl = URL.createObjectURL;
  URL.createObjectURL = function (blob) {
    const url = blobUrl.call(URL, blob);
    log('blob', {url, bytes: blob.size});
    return url;
  };
  const src = Object.getOwnPropertyDescriptor(HTMLImageElement.prototype, 'src');
  const hooked = new WeakSet();
  Object.defineProperty(HTMLImageElement.prototype, 'src', {
    configurable: true,
    get() { return src.get.call(this); },
    set(value) {
      const img = this;
      if (typeof value === 'string' && value.startsWith('blob:')) {
        log('src', {img: id(img), url: value});
        if (!hooked.has(img)) {
          hooked.add(img);
          img.addEventListener('load', () => log('load', {img: id(img), url: img.src,
            size: [img.naturalWidth, img.naturalHeight]}));
          img.addEventListener('error', () => log('error', {img: id(img), url: img.src}));
        }
      }
      src.set.call(this, value);
    },
  });
  for (const dim of ['width', 'height']) {
    const prop = Object.getOwnPropertyDescriptor(HTMLCanvasElement.prototype, dim);
    Object.defineProperty(HTMLCanvasElement.prototype, dim, {
      configurable: true,
      get() { return prop.get.call(this); },
      set(value) { log('size', {cv: id(this), [dim]: Number(value)}); prop.set.call(this, value); },
    });
  }
  const setAttribute = Element.prototype.setAttribute;
  Element.prototype.setAttribute = function (name, value) {
    if (this instanceof HTMLCanvasElement && (name === 'width' || name === 'height')) {
      log('size', {cv: id(this), [name]: Number(value)});
    }
    return setAttribute.call(this, name, value);
  };
  const clearRect = CanvasRenderingContext2D.prototype.clearRect;
  CanvasRenderingContext2D.prototype.clearRect = function (...args) {
    log('clear', {cv: id(this.canvas)});
    return clearRect.apply(this, args);
  };
  const drawImage = CanvasRenderingContext2D.prototype.drawImage;
  CanvasRenderingContext2D.prototype.drawImage = function (source, ...rest) {
    const ready = source instanceof HTMLImageElement ? source.complete && source.naturalWidth > 0
      : source.width > 0 && source.height > 0;
    log('draw', {cv: id(this.canvas), from: id(source), ready});
    return drawImage.call(this, source, ...rest);
  };
})();
