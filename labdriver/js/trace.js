// A page script, the frame trace, installed after init.js: in order, on performance.now()'s
// clock, every step a frame takes on its way to an explorer's picture, so a picture left
// blank can be followed back to its frames (labdriver.frame_trace). ipywidgets' Image view
// makes a blob URL of each PNG it receives and sets it as its <img>'s src. Logged: a blob
// URL made (its byte count matches the binary message it came from), an <img> given a frame,
// and the frame loaded (with its size) or failed. The kernel's messages join the same log in
// track_kernel.js.
(() => {
  const trace = window.__trace = [];
  let ids = 0;
  const id = (el) => el.__tid || (el.__tid = `img${++ids}`);
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
})();
