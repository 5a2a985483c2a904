// Milliseconds from the first input after `since` to box `b`'s first draw after it (null:
// no input, or no draw yet).
([b, since]) => {
  const boxes = Array.from(document.querySelectorAll('.jp-Notebook .widget-vbox'))
    .filter((x) => Array.from(x.children).some((c) => c.classList.contains('jupyter-matplotlib')));
  const canvas = boxes[b].querySelector('.jupyter-matplotlib-canvas-div canvas');
  const input = window.__inputTimes.filter((t) => t >= since)[0];
  const draw = (canvas.__draws || []).find((t) => input !== undefined && t > input);
  return input === undefined || draw === undefined ? null : draw - input;
}
