"""The hub's spawner: LocalProcessSpawner, each learner's server in cgroups of its own.

``c.Spawner.mem_limit`` and ``c.Spawner.cpu_limit`` (and ``cpu_guarantee``, a relative
weight) become limits the kernel enforces (course_cgroups.py): a learner who fills their
memory has their own biggest process (their kernel) ended by the OOM killer, and the other
learners go on. Where no cgroup hierarchy is writable (not root, a read-only
/sys/fs/cgroup) the hub logs a warning that the limits are not enforced and starts the
server anyway.

A learner's server reads the course's settings (``Spawner.environment``'s
``JUPYTER_CONFIG_PATH``), which leave nbgrader out; the teacher's, an admin's, reads
``teacher_settings`` instead, with the formgrader.
"""

from __future__ import annotations

import asyncio
import sys

import course_cgroups
from jupyterhub.spawner import LocalProcessSpawner
from traitlets import Unicode

__all__ = ["CourseSpawner"]


class CourseSpawner(LocalProcessSpawner):
    """LocalProcessSpawner with per-learner cgroups (memory and CPU limits enforced), and the
    teacher's own Jupyter settings."""

    teacher_settings = Unicode(
        "",
        config=True,
        help="JUPYTER_CONFIG_PATH for an admin's (the teacher's) server, in place of the "
        "learners' (Spawner.environment): the course's lab defaults with nbgrader's "
        "extensions on, for the formgrader. Empty: the same as the learners'.",
    )

    _cgroups: course_cgroups.LearnerCgroups | None = None

    def get_env(self) -> dict[str, str]:
        env = super().get_env()
        if self.user.admin and self.teacher_settings:
            env["JUPYTER_CONFIG_PATH"] = self.teacher_settings
        return env

    def _limits(self) -> course_cgroups.Limits:
        return course_cgroups.Limits(
            memory_bytes=self.mem_limit or None,
            cpus=self.cpu_limit or None,
            cpu_guarantee=self.cpu_guarantee or None,
        )

    async def start(self):
        name = self.user.name
        self._cgroups = None
        limits = self._limits()
        try:
            self._cgroups = course_cgroups.create(name, limits)
        except course_cgroups.Unavailable as why:
            self.log.warning(
                "%s: memory and CPU limits are NOT enforced (%s): their server runs "
                "without a cgroup of its own",
                name,
                why,
            )
        result = await super().start()  # forks, runs make_preexec_fn's function, execs
        if self._cgroups is not None:
            if self.pid in self._cgroups.pids():
                self.log.info(
                    "%s: server %d in %s (%s)",
                    name,
                    self.pid,
                    ", ".join(map(str, self._cgroups.dirs.values())),
                    limits,
                )
            else:
                self.log.warning(
                    "%s: server %d did not join its cgroups %s: limits NOT enforced",
                    name,
                    self.pid,
                    list(map(str, self._cgroups.dirs.values())),
                )
        return result

    def make_preexec_fn(self, name):
        drop_to_user = super().make_preexec_fn(name)
        cgroups = self._cgroups
        if cgroups is None:
            return drop_to_user

        def preexec():
            # in the child, still root: into the learner's cgroups first (a user may not
            # move a process into a cgroup), then the user's uid, groups and home
            for failure in cgroups.join_self():
                print(f"course_spawner: cannot join cgroup: {failure}", file=sys.stderr)
            drop_to_user()

        return preexec

    async def _remove_cgroups(self) -> None:
        if self._cgroups is None:
            return
        # off the hub's event loop: ending a stopped server's orphaned kernels may take a moment
        left = await asyncio.to_thread(course_cgroups.remove, self._cgroups)
        if left:
            self.log.warning("%s: cgroups not removed: %s", self.user.name, left)
        self._cgroups = None

    async def stop(self, now=False):
        await super().stop(now=now)
        await self._remove_cgroups()

    async def poll(self):
        status = await super().poll()
        if status is not None:  # the server ended on its own: its kernels go with it
            await self._remove_cgroups()
        return status
