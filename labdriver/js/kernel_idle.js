// The current notebook has a kernel and it is idle.
() => {
  const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  return !!k && k.status === 'idle';
}
