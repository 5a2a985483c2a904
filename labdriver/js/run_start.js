// Run → Run All Cells; returns when it began and how many non-empty code cells it runs.
() => {
  const w = window.jupyterapp.shell.currentWidget;
  const since = performance.now();
  window.jupyterapp.commands.execute('notebook:run-all-cells');
  const code = w.content.widgets.filter((c) => c.model.type === 'code'
                                          && c.model.sharedModel.getSource().trim() !== '');
  return {since, cells: code.length};
}
