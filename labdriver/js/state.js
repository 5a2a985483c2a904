// The page's state as the waits see it (`since`: a performance.now() time).
(since) => {
  const track = window.__kernel;
  const pending = Array.from(window.__images).filter((img) => !img.complete).length;
  return {
    now: performance.now(),
    status: track.kernel.status,
    outstanding: Array.from(track.outstanding.values()),
    quiet: track.outstanding.size === 0 && track.kernel.status === 'idle' && pending === 0,
    decoding: pending,
    sent: track.updates.filter((t) => t >= since).length,
    frames: window.__frames.filter((t) => t >= since).length,
    replies: track.replies.filter((r) => r.at >= since).length,
  };
}
