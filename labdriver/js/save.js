// File ▸ Save on the current notebook.
() => window.jupyterapp.commands.execute('docmanager:save')
