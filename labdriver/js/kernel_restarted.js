// The kernel was restarted after `since` (a performance.now() time), by the page or by the
// server after it died ("restarting", "autorestarting"), and the new one is idle.
(since) => {
  const track = window.__kernel;
  const restarted = track.statuses.some(
    (s) => s.t >= since && (s.status === 'restarting' || s.status === 'autorestarting'));
  return restarted && track.kernel.status === 'idle';
}
