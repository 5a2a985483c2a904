// The text of every dialog and toast notification on screen.
() => Array.from(document.querySelectorAll('.jp-Dialog, .Toastify__toast'))
  .map((n) => n.innerText.trim())
