// Installed once the notebook's kernel is connected: the messages the page sends the
// kernel that still await their "idle" status (a restart forgets them), the replies
// to cells, and every status the kernel went through (a restart's "autorestarting"). A
// request's outputs (a cell's text, a widget's frame) all arrive before its idle status.
// The comm messages also join the frame trace (trace.js).
() => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const track = window.__kernel = {
    kernel, outstanding: new Map(), updates: [], replies: [], lastIdle: 0, statuses: [],
  };
  // A restart (asked for, or the server's after a crash) ends the old kernel before it
  // answers the requests still queued: they never get their idle status, and
  // JupyterLab cancels their futures. The waits forget them the same way. (Seen in a soak:
  // the widget manager's comm_info_request, sent just after the page looked ready, cut off
  // by the restart that began the first run; Run All then waited for it for good.)
  kernel.statusChanged.connect((_, status) => {
    track.statuses.push({t: performance.now(), status});
    if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
      track.outstanding.clear();
    }
  });
  kernel.anyMessage.connect((_, {msg, direction}) => {
    const now = performance.now();
    if (msg.channel === 'iopub' || msg.channel === 'shell') {  // the comms, in the frame trace
      const type = msg.header.msg_type;
      const data = msg.content && msg.content.data;
      if (type === 'comm_open' && data && data.state) {
        window.__trace.push({t: now, e: 'open', comm: msg.content.comm_id,
          model: data.state._model_name, children: data.state.children,
          bytes: msg.buffers && msg.buffers.length ? msg.buffers[0].byteLength : null});
      } else if (type === 'comm_msg' && data) {
        const entry = {t: now, e: direction === 'send' ? 'sent' : 'msg',
                       comm: msg.content.comm_id, method: data.method};
        if (data.state) entry.keys = Object.keys(data.state).join(',');
        if (msg.buffers && msg.buffers.length) entry.bytes = msg.buffers[0].byteLength;
        window.__trace.push(entry);
      }
    }
    if (direction === 'send' && msg.channel === 'shell') {
      track.outstanding.set(msg.header.msg_id, `${msg.header.msg_type}@${Math.round(now)}`);
      const data = msg.header.msg_type === 'comm_msg' && msg.content.data;
      if (data && data.method === 'update') track.updates.push(now);  // a control's new value
    } else if (direction === 'recv' && msg.header.msg_type === 'status'
               && msg.content.execution_state === 'idle') {
      track.outstanding.delete(msg.parent_header.msg_id);
      track.lastIdle = now;
    } else if (direction === 'recv' && msg.header.msg_type === 'execute_reply') {
      track.replies.push({at: now, status: msg.content.status});
      // a request aborted after an earlier error has no outputs, and may get no status
      if (msg.content.status === 'aborted') track.outstanding.delete(msg.parent_header.msg_id);
    }
  });
  return true;
}
