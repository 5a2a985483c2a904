// The notebook at `path` is the current widget, its kernel connected and idle, its cells in
// place. `window.jupyterapp` is there because the lab runs with expose_app_in_browser.
(path) => {
  const app = window.jupyterapp;
  if (!app || !app.shell) return false;
  const w = app.shell.currentWidget;
  if (!w || !w.context || w.context.path !== path || !w.sessionContext) return false;
  const k = w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.status === 'idle' && w.content.widgets.length > 0;
}
