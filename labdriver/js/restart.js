// Restart the current notebook's kernel; resolves once the restart is done.
async () => { await window.jupyterapp.shell.currentWidget.sessionContext.restartKernel(); }
