// Box `b`'s figure canvas: a hash of its pixels, how many times it was drawn, its size.
(b) => {
  const boxes = Array.from(document.querySelectorAll('.jp-Notebook .widget-vbox'))
    .filter((x) => Array.from(x.children).some((c) => c.classList.contains('jupyter-matplotlib')));
  const canvas = boxes[b].querySelector('.jupyter-matplotlib-canvas-div canvas');
  const data = canvas.toDataURL();
  let h = 0;
  for (let i = 0; i < data.length; i++) h = (h * 31 + data.charCodeAt(i)) | 0;
  const draws = canvas.__draws || [];
  return {hash: `${data.length}:${h}`, draws: draws.length,
          width: canvas.width, height: canvas.height};
}
