// Runs `code` in the notebook's kernel (not in a cell): its stdout and its error, if any.
async (code) => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const future = kernel.requestExecute(
    {code, silent: false, store_history: false, allow_stdin: false, stop_on_error: false});
  let out = '';
  let error = null;
  future.onIOPub = (msg) => {
    const type = msg.header.msg_type;
    if (type === 'stream' && msg.content.name === 'stdout') out += msg.content.text;
    if (type === 'error') error = msg.content.traceback.join('\n');
  };
  await future.done;
  return {out, error};
}
