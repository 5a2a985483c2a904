"""Faults on a class's JupyterHub: one learner's kernel dies or fills their memory; the rest go on.

The hub's spawner (teachers/hub/course_spawner.py) puts each learner's server, and so
their kernels, in cgroups of their own with the limits of ``COURSE_HUB_MEM_LIMIT`` and
``COURSE_HUB_CPU_LIMIT`` (teachers/hub/course_cgroups.py). Here:

- the cgroups themselves, without a hub: the limits written, a process over the memory
  limit ended by the OOM killer, one that spins throttled, everything removed after; the
  spawner's own start and stop (a stand-in server); no writable hierarchy: a warning, and
  the server runs anyway;
- one hub (as test_hub.py's, with `MEM_LIMIT` and `CPU_LIMIT`), two learners who each run
  01 in their own JupyterLab: each learner's server and kernel are in their own cgroups
  with those limits;
- Ben's kernel is killed (SIGKILL) mid-session: his page sees it restart, his saved
  notebook is unchanged on disk, re-run it draws again; Ann, moving a slider all along,
  keeps her kernel and her redraws;
- Ben allocates far past his memory limit: the OOM killer ends his kernel (his cgroup's
  count says so) and his server stays up and restarts it; Ann's server and kernel are
  untouched and her slider still redraws;
- stopping Ben's server removes his cgroups and ends his processes; stopping the hub
  removes everything (users, cgroups, processes).

Run as root by ``make test-hub``; skips, saying why, when not root or without Chromium,
npm, git or a writable cgroup hierarchy.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import pwd
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from support import stand_in_spawner
from test_front_ends import QUICK
from test_hub import NOTEBOOKS, home, ready, remote, workdir  # noqa: F401 (fixtures)

import labdriver
from course import hub as course_hub
from labdriver import hub as hubdriver
from labdriver.sources import js

pytestmark = [pytest.mark.hub, pytest.mark.slow]

ANN, BEN = "hubfault-ann", "hubfault-ben"
MEM_LIMIT = "700M"  # a server (110 MiB) and a kernel that ran 01 (160 MiB), with room
MEM_BYTES = 700 * 2**20
CPU_LIMIT = "1.0"
HOG_GIB = 2  # what Ben allocates, far past MEM_LIMIT
CPU_PERIOD_US = 100_000

cgroups = hubdriver.course_cgroups()


@pytest.fixture(scope="module")
def writable_cgroups():
    """Skips unless this process may make cgroups (as the hub, root, does)."""
    if os.geteuid() != 0:
        pytest.skip("the cgroup tests make cgroups: run them as root")
    try:
        cgroups.remove(cgroups.create("hubfault-probe", cgroups.Limits()))
    except cgroups.Unavailable as why:
        pytest.skip(f"no cgroup hierarchy to write here: {why}")


def _read(folder: Path, name: str) -> str:
    return (folder / name).read_text().strip()


# -- the cgroups, and the spawner, without a hub -------------------------------------------


def test_a_learners_cgroups_hold_their_limits_and_go_away(writable_cgroups):
    made = cgroups.create("hubfault-unit", cgroups.Limits(200 * 2**20, 0.5, 2.0))
    hog = sleeper = None
    try:
        if "memory" in made.dirs:  # cgroup v1
            memory, cpu = made.dirs["memory"], made.dirs["cpu"]
            assert _read(memory, "memory.limit_in_bytes") == str(200 * 2**20)
            if (memory / "memory.memsw.limit_in_bytes").exists():
                assert _read(memory, "memory.memsw.limit_in_bytes") == str(200 * 2**20)
            assert _read(cpu, "cpu.cfs_quota_us") == str(CPU_PERIOD_US // 2)
            assert _read(cpu, "cpu.cfs_period_us") == str(CPU_PERIOD_US)
            assert _read(cpu, "cpu.shares") == "2048"
        else:  # cgroup v2
            unified = made.dirs["unified"]
            assert _read(unified, "memory.max") == str(200 * 2**20)
            if (unified / "cpu.max").exists():
                assert _read(unified, "cpu.max") == f"{CPU_PERIOD_US // 2} {CPU_PERIOD_US}"
        # a process in them that writes 400 MiB is ended by the OOM killer, and counted
        before = made.oom_kills()
        hog = subprocess.Popen(
            [sys.executable, "-c", "import numpy as np; np.ones(400 * 2**20 // 8)"],
            preexec_fn=made.join_self,
        )
        assert hog.wait(60) == -signal.SIGKILL
        assert made.oom_kills() == before + 1
        # a process that spins for a second gets half a CPU: the CFS quota throttles it
        spin = "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 1: pass"
        subprocess.run([sys.executable, "-c", spin], preexec_fn=made.join_self, check=True)
        stat = made.dirs.get("cpu", made.dirs.get("unified"))
        if stat is not None and (stat / "cpu.stat").exists():
            counts = dict(line.split() for line in _read(stat, "cpu.stat").splitlines())
            assert int(counts["nr_throttled"]) > 0, counts
        sleeper = subprocess.Popen(["sleep", "300"], preexec_fn=made.join_self)
        assert made.pids() == {sleeper.pid}
        for folder in made.dirs.values():
            assert (
                f"{folder.parent.name}/{folder.name}"
                in Path(f"/proc/{sleeper.pid}/cgroup").read_text()
            )
        # removing them ends what is left in them first
        assert cgroups.remove(made) == []
        assert sleeper.wait(10) == -signal.SIGKILL
        assert [f for f in made.dirs.values() if f.exists()] == []
    finally:
        for proc in (hog, sleeper):
            if proc is not None and proc.poll() is None:
                proc.kill()
        cgroups.remove(made)


def _run(coroutine):
    """asyncio.run in a thread of its own: in this process Playwright's sync API (the hub
    tests run before these) holds an event loop in the main thread."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _stand_in_spawner(**traits):
    """The hub's spawner with stand-ins, whose "server" is ``sleep``: its start and stop,
    without a hub."""
    return stand_in_spawner(cmd=["sleep", "300"], args=[], **traits)


def test_the_spawner_starts_the_server_in_its_cgroups_and_removes_them_on_stop(
    writable_cgroups,
):
    _, spawner = _stand_in_spawner(mem_limit="300M", cpu_limit=0.5)

    async def start_and_stop():
        await spawner.start()
        made, pid = spawner._cgroups, spawner.pid
        try:
            inside = made.pids()
            uid = psutil.Process(pid).uids().real
            memory, name = next(
                (made.dirs[k], f)
                for k, f in [("memory", "memory.limit_in_bytes"), ("unified", "memory.max")]
                if k in made.dirs
            )
            limit = _read(memory, name)
        finally:
            await spawner.stop(now=True)
        return made, pid, inside, uid, limit

    made, pid, inside, uid, limit = _run(start_and_stop())
    assert inside == {pid}, "the server did not start in its cgroups"
    assert uid == pwd.getpwnam("nobody").pw_uid, "the server did not run as the learner"
    assert limit == str(300 * 2**20)
    assert [f for f in made.dirs.values() if f.exists()] == [], "cgroups left after stop"
    assert _alive({pid}) == set(), "the server outlived its stop"


def test_without_a_writable_hierarchy_the_spawner_warns_and_starts_anyway(
    writable_cgroups, monkeypatch, caplog
):
    course_spawner, spawner = _stand_in_spawner(mem_limit="300M")

    def unavailable(*args, **kwargs):
        raise course_spawner.course_cgroups.Unavailable("/sys/fs/cgroup is read-only (test)")

    monkeypatch.setattr(course_spawner.course_cgroups, "create", unavailable)

    async def start_and_stop():
        await spawner.start()
        try:
            return psutil.Process(spawner.pid).is_running()
        finally:
            await spawner.stop(now=True)

    with caplog.at_level(logging.WARNING, logger="course-spawner-test"):
        assert _run(start_and_stop()), "the server did not start"
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("NOT enforced" in w and "read-only (test)" in w for w in warned), warned


def test_no_cgroup_mounted_says_so(tmp_path):
    """A machine whose /proc shows no cgroup mount: `Unavailable`, naming what is missing."""
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "cgroup").write_text("0::/\n")
    (tmp_path / "self" / "mountinfo").write_text("22 1 0:21 / /proc rw - proc proc rw\n")
    with pytest.raises(cgroups.Unavailable, match="no writable cgroup hierarchy"):
        cgroups.create("someone", cgroups.Limits(2**30), proc=tmp_path)


# -- a hub with limits, two learners --------------------------------------------------------


@pytest.fixture(scope="module")
def hub(workdir, remote, writable_cgroups):  # noqa: F811 (test_hub's fixtures, by name)
    for name in (ANN, BEN):  # left by a run that was killed before it could clean up
        course_hub.remove_learner(name)
    settings = {"COURSE_HUB_MEM_LIMIT": MEM_LIMIT, "COURSE_HUB_CPU_LIMIT": CPU_LIMIT}
    with hubdriver.running_hub(
        workdir / "faults", [ANN, BEN], repo=remote.url, settings=settings
    ) as running:
        yield running


@pytest.fixture(scope="module")
def lessons(hub, chromium):
    """Each learner logged in, with 01 open and run (Run All) in their own JupyterLab."""
    contexts, pages = {}, {}
    try:
        for name in (ANN, BEN):
            contexts[name] = hubdriver.log_in(chromium, hub, name)
            pages[name] = labdriver.NotebookPage.open(
                chromium,
                hub.server(name),
                NOTEBOOKS + QUICK,
                workspace="faults",
                viewport=(1280, 800),
                context=contexts[name],
            )
            pages[name].run_all()
            assert _errors(pages[name]) == [], f"{name}: errors after Run All"
        yield pages
    finally:
        for page in pages.values():
            page.close()
        for context in contexts.values():
            context.close()


def _errors(page) -> list[str]:
    """Error outputs in the page, but those the notebook shows on purpose."""
    return [
        f"cell {c['index']}: {o['ename']}: {o['evalue']}"
        for c in page.cells()
        if "raises-exception" not in c["tags"]
        for o in c["outputs"]
        if o["output_type"] == "error"
    ]


def _pids(hub, name: str) -> dict[str, set[int]]:
    """Learner ``name``'s server and kernel processes, by pid."""
    found: dict[str, set[int]] = {"server": set(), "kernel": set()}
    for proc in hub.processes(name):
        try:
            command = " ".join(proc.cmdline())
        except psutil.NoSuchProcess:
            continue
        if "ipykernel" in command:
            found["kernel"].add(proc.pid)
        elif "jupyterhub-singleuser" in command:
            found["server"].add(proc.pid)
    return found


def _move_a_slider(page, where: str, key: str | None = None) -> labdriver.Move:
    """Move the page's first slider one step, as a learner does; it must redraw."""
    control = next(
        c for box in page.controls() for c in box if c["kind"] == "slider" and not c["disabled"]
    )
    page.scroll_to(control)
    move = page.move(control, key or ("ArrowLeft" if control["atMax"] else "ArrowRight"))
    assert move.changed_pixels, f"{where}: moving {control['description']!r} redrew nothing"
    return move


def test_each_learner_runs_in_cgroups_with_the_limits(hub, lessons):
    for name in (ANN, BEN):
        pids = _pids(hub, name)
        assert len(pids["server"]) == 1 and len(pids["kernel"]) == 1, pids
        made = hub.cgroups(name)
        assert pids["server"] | pids["kernel"] <= made.pids(), f"{name}: {made}"
        assert hub.proc.pid not in made.pids()
        if "memory" in made.dirs:
            assert _read(made.dirs["memory"], "memory.limit_in_bytes") == str(MEM_BYTES)
            assert _read(made.dirs["cpu"], "cpu.cfs_quota_us") == str(CPU_PERIOD_US)
        else:
            assert _read(made.dirs["unified"], "memory.max") == str(MEM_BYTES)


def test_a_killed_kernel_restarts_and_the_saved_notebook_stays(hub, lessons):
    ann, ben = lessons[ANN], lessons[BEN]
    labdriver.save_notebook(ben)
    saved_path = home(BEN) / NOTEBOOKS / QUICK
    saved = saved_path.read_bytes()
    ann_before, ben_before = _pids(hub, ANN), _pids(hub, BEN)
    since = ben.now()
    killed_at = time.monotonic()
    (kernel,) = ben_before["kernel"]
    psutil.Process(kernel).send_signal(signal.SIGKILL)
    # Ann moves her slider while Ben's kernel is dead and restarting (at least once), and after
    during = []
    while not during or not ben.page.evaluate(js("kernel_restarted"), since):
        during.append(_move_a_slider(ann, f"{ANN}, while {BEN}'s kernel restarts"))
        assert time.monotonic() - killed_at < 300, f"{BEN}'s kernel: {ben.kernel_statuses(since)}"
    restarted = ben.wait_restarted(since)
    restart_s = time.monotonic() - killed_at
    after = _move_a_slider(ann, f"{ANN}, after {BEN}'s kernel restarted")
    print(f"\n{BEN}'s kernel: {restarted}, idle again {restart_s:.1f} s after SIGKILL")
    print(
        f"{ANN}'s redraws meanwhile: {[round(m.latency_ms or -1) for m in during]} ms, "
        f"after: {round(after.latency_ms or -1)} ms"
    )
    assert "autorestarting" in restarted, restarted
    # the learner is told (JupyterLab's "Kernel Restarting: ... appears to have died")
    assert any("Kernel Restarting" in d for d in ben.dialogs()), ben.dialogs()
    ben.dismiss_dialogs()
    # the saved notebook, as saved; and nothing unsaved that an autosave would write
    assert saved_path.read_bytes() == saved, "the saved notebook changed on disk"
    assert ben.page.evaluate(js("saved")), "the notebook is dirty"
    ben_after = _pids(hub, BEN)
    assert ben_after["server"] == ben_before["server"], "Ben's server was restarted"
    assert ben_after["kernel"] and ben_after["kernel"].isdisjoint(ben_before["kernel"])
    # re-run, the explorers draw and move again
    ben.run_all()
    assert _errors(ben) == []
    _move_a_slider(ben, f"{BEN}, re-run after the restart")
    assert _pids(hub, ANN) == ann_before, "Ann's server or kernel changed"
    assert _errors(ann) == [] and ann.dialogs() == [], ann.dialogs()


def test_a_learner_who_fills_their_memory_is_stopped_alone(hub, lessons):
    ann, ben = lessons[ANN], lessons[BEN]
    ann_before, ben_before = _pids(hub, ANN), _pids(hub, BEN)
    ann_cgroups, ben_cgroups = hub.cgroups(ANN), hub.cgroups(BEN)
    ann_kills, ben_kills = ann_cgroups.oom_kills(), ben_cgroups.oom_kills()
    since, ann_since = ben.now(), ann.now()  # each page has its own clock
    # as a cell would: every page of 2 GiB written (np.ones), far past the 700 MiB limit
    ben.page.evaluate(
        "(code) => { window.__kernel.kernel.requestExecute({code}); }",
        f"import numpy as np\nhog = np.ones({HOG_GIB} * 2**30 // 8)",
    )
    restarted = ben.wait_restarted(since)
    memory = ben_cgroups.dirs.get("memory")
    if memory is not None:
        swap = (memory / "memory.memsw.failcnt").exists()
        print(
            f"\n{BEN}'s memory cgroup: failcnt {_read(memory, 'memory.failcnt')} "
            f"(memory+swap {_read(memory, 'memory.memsw.failcnt') if swap else '-'}), max usage "
            f"{int(_read(memory, 'memory.max_usage_in_bytes')) / 2**20:.0f} MiB "
            f"of {MEM_BYTES / 2**20:.0f}; kernel {restarted}"
        )
    assert ben_cgroups.oom_kills() > ben_kills, "the OOM killer ended nothing of Ben's"
    assert "autorestarting" in restarted, restarted
    ben.dismiss_dialogs()
    ben_after = _pids(hub, BEN)
    # the OOM killer takes the biggest process in the cgroup, the kernel: Ben's server
    # stays up (the same process) and has restarted his kernel
    assert ben_after["server"] == ben_before["server"], (ben_before, ben_after)
    assert ben_after["kernel"] and ben_after["kernel"].isdisjoint(ben_before["kernel"])
    status, user = hub.api("GET", f"/users/{BEN}")
    assert status == 200 and user["servers"][""]["ready"], user
    # Ann: nothing killed, nothing restarted, and her explorer still redraws
    assert ann_cgroups.oom_kills() == ann_kills == 0
    assert _pids(hub, ANN) == ann_before, "Ann's server or kernel changed"
    _move_a_slider(ann, f"{ANN}, after {BEN} filled his memory")
    assert ann.kernel_statuses(ann_since).count("autorestarting") == 0
    assert _errors(ann) == [] and ann.dialogs() == [], ann.dialogs()


def test_stopping_a_server_and_the_hub_leaves_nothing(hub, lessons):
    """Last: it stops the hub (the fixture's stop then has nothing left to do)."""
    ben_pids = set().union(*_pids(hub, BEN).values())
    ben_cgroups = hub.cgroups(BEN)
    status, _ = hub.api("DELETE", f"/users/{BEN}/server")
    assert status in (202, 204), status
    deadline = time.monotonic() + 120
    while hub.api("GET", f"/users/{BEN}")[1]["servers"] and time.monotonic() < deadline:
        time.sleep(0.5)
    # the spawner's stop: Ben's cgroups removed, his server and kernel ended
    assert [f for f in ben_cgroups.dirs.values() if f.exists()] == []
    assert _alive(ben_pids) == set()
    ann_pids = set().union(*_pids(hub, ANN).values())
    ann_cgroups = hub.cgroups(ANN)
    everything = {
        hub.proc.pid,
        *ann_pids,
        *(p.pid for p in psutil.Process(hub.proc.pid).children(True)),
    }
    # the hub's own shutdown (SIGTERM, as systemd stops it) stops Ann's server through the
    # spawner, which removes her cgroups (Hub.stop would remove them too: not yet called)
    hub.proc.send_signal(signal.SIGTERM)
    hub.proc.wait(60)
    assert [f for f in ann_cgroups.dirs.values() if f.exists()] == [], hub.log_tail()
    hub.stop()  # the proxy, the users
    assert _alive(everything) == set()
    for name in (ANN, BEN):
        assert subprocess.run(["id", name], capture_output=True).returncode != 0, name


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.add(pid)
        except psutil.NoSuchProcess:
            pass
    return alive
