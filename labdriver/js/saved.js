// The current notebook has no unsaved changes.
() => !window.jupyterapp.shell.currentWidget.context.model.dirty
