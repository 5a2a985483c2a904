# The course's JupyterHub: one server, real system users, each learner's own JupyterLab.
# Started by `python -m course hub start` (docs/teachers.md, "Teaching a class"), which sets the
# COURSE_HUB_* variables below; a teacher may also edit this file (it is plain Python).
#
#   COURSE_HUB_PREFIX        the environment `python -m course hub install` made
#                            (/opt/attention-course): learners' servers and the hub run from it
#   COURSE_HUB_STATE         the hub's database and cookie secret (root's alone)
#   COURSE_HUB_IP, _PORT     where the hub listens (127.0.0.1:8000 unless told)
#   COURSE_HUB_HUB_PORT, COURSE_HUB_PROXY_API_PORT   the hub's API and the proxy's, on
#                            127.0.0.1 (8081 and 8001)
#   COURSE_HUB_ADMINS        comma-separated admin users: the teacher (default "teacher")
#   COURSE_HUB_LEARNERS      comma-separated allowed learners; empty: the members of the
#                            group COURSE_HUB_GROUP (attention-learners: `learners add`
#                            puts each learner in it), with PAM
#   COURSE_HUB_AUTH          "pam" (default: the system users' own passwords) or "dummy"
#                            (tests only: one shared password, COURSE_HUB_DUMMY_PASSWORD)
#   COURSE_HUB_DEFAULT_URL   where a learner lands: the course's nbgitpuller link
#   COURSE_HUB_CULL_TIMEOUT  seconds of inactivity before a learner's server is stopped (3600)
#   COURSE_HUB_MEM_LIMIT     each learner's memory, their server and kernels together ("2G";
#                            K, M, G, T suffixes; "0": no limit), enforced by a cgroup of
#                            their own (course_spawner.py): a learner who fills it has their
#                            kernel ended by the OOM killer, and it restarts; no one else's
#   COURSE_HUB_CPU_LIMIT     each learner's CPUs at most, as a CFS quota ("1.5"; unset or "0":
#                            none; each learner's cgroup still gets an equal share of a busy
#                            machine, however many threads their kernels run)
#                            (where /sys/fs/cgroup is not writable the hub logs a warning that
#                            neither limit is enforced)
#   COURSE_HUB_TEST_TOKEN    tests only: an API token for a "course-tests" service with the
#                            admin role, and JupyterLab's app exposed to the page
import os
import re
import sys
from pathlib import Path

c = get_config()  # noqa: F821 (JupyterHub's loader defines it)

env = os.environ.get
prefix = Path(env("COURSE_HUB_PREFIX", "/opt/attention-course"))
state = Path(env("COURSE_HUB_STATE", "/srv/attention-course"))
user_env = prefix / "user"


def names(variable, default=""):
    return {n.strip() for n in env(variable, default).split(",") if n.strip()}


# -- where it listens, and its state ----------------------------------------------------
# Put HTTPS in front for a real class (a reverse proxy such as Caddy or nginx, or
# c.JupyterHub.ssl_cert / ssl_key): passwords and cookies must not cross a network in clear.
c.JupyterHub.ip = env("COURSE_HUB_IP", "127.0.0.1")
c.JupyterHub.port = int(env("COURSE_HUB_PORT", "8000"))
c.JupyterHub.hub_ip = "127.0.0.1"  # the hub's own API: the proxy and servers are local
# the hub's and the proxy's own ports, on 127.0.0.1 (JupyterHub's 8081 and 8001 unless
# told: two hubs on one machine, as in the tests, need others)
c.JupyterHub.hub_port = int(env("COURSE_HUB_HUB_PORT", "8081"))
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{env('COURSE_HUB_PROXY_API_PORT', '8001')}"
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.ConfigurableHTTPProxy.command = [
    str(prefix / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy")
]
c.ConfigurableHTTPProxy.pid_file = str(state / "jupyterhub-proxy.pid")
c.JupyterHub.cleanup_servers = True  # the hub's stop ends the learners' servers too

# -- who may log in ---------------------------------------------------------------------
auth = env("COURSE_HUB_AUTH", "pam")
if auth == "dummy":
    password = env("COURSE_HUB_DUMMY_PASSWORD", "")
    if not password:
        sys.exit("COURSE_HUB_AUTH=dummy needs COURSE_HUB_DUMMY_PASSWORD (tests only)")
    c.JupyterHub.authenticator_class = "dummy"
    c.DummyAuthenticator.password = password
elif auth == "pam":
    c.JupyterHub.authenticator_class = "pam"
else:
    sys.exit(f"COURSE_HUB_AUTH={auth!r}: use 'pam', or 'dummy' in tests")
c.Authenticator.admin_users = names("COURSE_HUB_ADMINS", "teacher")
learners = names("COURSE_HUB_LEARNERS")
if learners:
    c.Authenticator.allowed_users = learners
elif auth == "pam":
    # the class: the users `python -m course hub learners add` made (never root, or any
    # other account of the machine)
    c.LocalAuthenticator.allowed_groups = {env("COURSE_HUB_GROUP", "attention-learners")}
else:
    sys.exit("COURSE_HUB_LEARNERS must list the learners when COURSE_HUB_AUTH is not pam")
c.Authenticator.allow_existing_users = False  # the list above is the class, nothing more

# -- each learner's server: their own system user, home and JupyterLab -----------------
# LocalProcessSpawner, with each learner's server in cgroups of its own (course_spawner.py)
sys.path.insert(0, str(Path(__file__).resolve().parent))
c.JupyterHub.spawner_class = "course_spawner.CourseSpawner"
c.Spawner.cmd = [str(user_env / "bin" / "jupyterhub-singleuser")]
c.CourseSpawner.teacher_settings = str(prefix / "jupyter-teacher")
c.Spawner.notebook_dir = "~"
c.Spawner.default_url = env("COURSE_HUB_DEFAULT_URL", "/lab")
c.Spawner.environment = {
    # the course's Jupyter settings (jupyter/: the lab defaults, nbgrader's extensions off),
    # as `make lab` layers them; the teacher's server reads jupyter-teacher, nbgrader on
    "JUPYTER_CONFIG_PATH": str(prefix / "jupyter"),
    "PATH": f"{user_env / 'bin'}:/usr/local/bin:/usr/bin:/bin",
}
# The heaviest notebook holds 614 MiB per learner (03: a 530 MiB kernel and a 110 MiB
# server, benchmarks/results/learner-memory-*.json); 2G leaves room for three notebooks'
# kernels open at once (03, 04 and 02 with the server: about 1.25 GiB) and a cell's peaks.
mem_limit = env("COURSE_HUB_MEM_LIMIT", "2G").strip()
if not re.fullmatch(r"\d+(\.\d+)?[KMGT]?", mem_limit):
    sys.exit(f"COURSE_HUB_MEM_LIMIT={mem_limit!r}: a size such as 2G or 700M (0: no limit)")
if float(mem_limit.rstrip("KMGT")) == 0:
    c.Spawner.mem_limit = None
else:  # JupyterHub's own parsing: bytes, or a number with a suffix
    c.Spawner.mem_limit = mem_limit if mem_limit[-1] in "KMGT" else int(float(mem_limit))
cpu_limit = env("COURSE_HUB_CPU_LIMIT", "").strip() or "0"
try:
    c.Spawner.cpu_limit = float(cpu_limit) or None
except ValueError:
    sys.exit(f"COURSE_HUB_CPU_LIMIT={cpu_limit!r}: a number of CPUs such as 1.5 (0: no limit)")
c.Spawner.start_timeout = 120  # a loaded 2-core machine starts a server in tens of seconds
c.Spawner.http_timeout = 120
test_token = env("COURSE_HUB_TEST_TOKEN", "")
if test_token:
    # labdriver's page waits read JupyterLab's app object
    c.Spawner.args = ["--LabApp.expose_app_in_browser=True"]

# -- services: the idle culler, and the tests' admin token -------------------------------
cull_timeout = int(env("COURSE_HUB_CULL_TIMEOUT", "3600"))
c.JupyterHub.services = [
    {
        "name": "idle-culler",
        "command": [
            str(user_env / "bin" / "python"),
            "-m",
            "jupyterhub_idle_culler",
            f"--timeout={cull_timeout}",
        ],
    }
]
c.JupyterHub.load_roles = [
    {
        "name": "idle-culler",
        "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
        "services": ["idle-culler"],
    }
]
if test_token:
    c.JupyterHub.services.append({"name": "course-tests", "api_token": test_token})
    c.JupyterHub.load_roles.append({"name": "admin", "services": ["course-tests"]})
