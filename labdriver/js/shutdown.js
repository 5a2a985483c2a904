// Shut the current notebook's kernel down.
() => window.jupyterapp.shell.currentWidget.sessionContext.shutdown()
