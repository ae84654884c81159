"""Developer sessions.

- ``nox -s demo``: the reference integrations on the local control plane (or on the
  cluster of ``KUBECONFIG`` / ``--kubeconfig``), through real Kueue;
- ``nox -s tests``: unit and contract tests on the in-memory API server;
- ``nox -s lint``: ruff and ``mypy --strict`` on ``src/``;
- ``nox -s integration``: builds the Go control plane if its pins changed, starts it,
  runs the tests marked ``cluster``, and tears it down;
- ``nox -s package``: builds the wheel and installs it in a fresh venv, as the Containerfile does;
- ``nox -s bench``: benchmarks, as ratios to baselines measured in the same run;
- ``nox -s bench-cluster``: our batch/v1 Job integration against Kueue's own, on two local
  control planes one after the other (``-- --jobs 500 --jobs 5000``; ``-- --embedded``
  adds a third, the integration embedded in a program of one's own);
- ``nox -s bench-cluster-ab``: our manager's CPU per Job, two versions of ``src`` side by
  side on one local control plane (``-- --baseline main``);
- ``nox -s faults``: the fault suite on a local control plane of its own (CI's short run;
  ``-- --seed 21 --lifecycles 300 --kills 20`` for the long one, ``-- --load 2000`` for
  the load run; see ``docs/reliability.md``).
"""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = "3.11"


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """The seed's JobFlows through real Kueue on the local control plane (built if needed).

    ``nox -s demo -- --kubeconfig PATH`` runs on your own cluster with Kueue installed.
    """
    session.install("-e", ".")
    session.run("python", "-m", "integrations.demo", *session.posargs)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Unit tests on the in-memory API server."""
    session.install("-e", ".[test,speed,kopf]")
    session.run("pytest", "-q", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff and mypy --strict on src/."""
    session.install("-e", ".[lint,test,speed]")
    session.run("ruff", "check", "src", "tests", "benchmarks", "noxfile.py")
    session.run("mypy", "src")


@nox.session(python=PYTHON)
def integration(session: nox.Session) -> None:
    """Tests marked ``cluster`` on a real local control plane with a real Kueue manager."""
    session.install("-e", ".[test,speed,kopf]")
    # Builds only when the pins in tests/cluster changed; progress goes to stderr.
    session.run("python", "-m", "jobframework.testing.cluster", "build")
    session.run("pytest", "-q", "-m", "cluster", *session.posargs)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks on the in-memory API server (see docs/performance.md).

    Arguments go to run.py, e.g. ``nox -s bench -- --scale 0.2 --output -``.
    """
    session.install("-e", ".")
    session.run("python", "benchmarks/run.py", *session.posargs)


@nox.session(name="bench-cluster", python=PYTHON)
def bench_cluster(session: nox.Session) -> None:
    """Real-control-plane benchmark (see docs/performance.md); builds the cluster if needed.

    ``nox -s bench-cluster -- --jobs 500 --jobs 5000`` (default: 500 Jobs); ``--embedded``
    adds the integration embedded the documented way beside the shipped manager.
    """
    session.install("-e", ".[speed]")
    session.run("python", "-m", "jobframework.testing.cluster", "build")
    session.run("python", "benchmarks/cluster.py", *session.posargs)


@nox.session(name="bench-cluster-ab", python=PYTHON)
def bench_cluster_ab(session: nox.Session) -> None:
    """Our manager's CPU per Job, two versions of src side by side on one local cluster.

    ``nox -s bench-cluster-ab -- --baseline main`` (that ref's src against this one's).
    """
    session.install("-e", ".[speed]")
    session.run("python", "-m", "jobframework.testing.cluster", "build")
    session.run("python", "benchmarks/cluster_ab.py", *session.posargs)


#: ``nox -s faults -- --NAME VALUE`` → pytest's ``--faults-NAME VALUE``.
FAULT_OPTIONS = ("seed", "lifecycles", "kills", "compactions", "apiserver-restarts",
                 "hostile", "integrations", "load", "dir", "report")


@nox.session(python=PYTHON)
def faults(session: nox.Session) -> None:
    """The fault and bad-input suite on a local control plane of its own (builds it if needed).

    Without arguments: CI's short run (40 lifecycles over every registered integration,
    4 manager SIGKILLs, an etcd compaction, the proxy's faults, a hostile tenant on 30 %
    of the JobFlows, DaemonJobs and AppWrappers), a load run of 200 jobs and the
    bad-input tests. ``-- --seed 2026 --lifecycles 300 --kills 20 --compactions 3``
    is the long run; ``--apiserver-restarts N`` adds API server restarts; ``--hostile
    SHARE`` sets the tenant's share (0: none); ``--load 2000`` runs only the load run, at
    that size; ``--report PATH`` writes the JSON report there.
    """
    session.install("-e", ".[test,speed]")
    session.run("python", "-m", "jobframework.testing.cluster", "build")
    args = list(session.posargs)
    pytest_args: list[str] = []
    marker = "faults"
    while args:
        arg = args.pop(0)
        name = arg[2:].split("=", 1)[0] if arg.startswith("--") else ""
        if name in FAULT_OPTIONS:
            value = arg.split("=", 1)[1] if "=" in arg else args.pop(0)
            pytest_args.append(f"--faults-{name}={value}")
            if name == "load":
                marker = "load"
        else:
            pytest_args.append(arg)
    session.run("pytest", "-q", "-s", "-m", marker, "tests/faults", *pytest_args)


@nox.session(python=PYTHON)
def package(session: nox.Session) -> None:
    """Build the wheel and install it as the ``Containerfile`` does, in this fresh venv.

    The image itself cannot be built on machines that pull no base images; this proves
    the same steps: the wheel (not the source tree) installs with its ``speed`` extra,
    carries its CRDs, samples and deploy templates, and its entry points run.
    """
    import glob
    import os

    tmp = os.path.abspath(session.create_tmp())
    dist = os.path.join(tmp, "dist")
    for old in glob.glob(os.path.join(dist, "*.whl")):
        os.remove(old)
    session.run("python", "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", dist, ".")
    (wheel,) = glob.glob(os.path.join(dist, "kueue_jobframework-*.whl"))
    session.install(f"{wheel}[speed]")
    session.chdir(tmp)  # away from src/: only the installed wheel is importable
    session.run("python", "-m", "integrations", "run", "--help", silent=True)
    session.run("python", "-c", (
        "import integrations, jobframework, pathlib;"
        "assert 'site-packages' in integrations.__file__, integrations.__file__;"
        "from integrations.catalog import reference_names;"
        "from jobframework.plugins import load_integration;"
        "names = reference_names();"
        "assert names == ('appwrapper', 'batchjob', 'daemonjob', 'jobflow'), names;"
        "crds = [c for n in names for c in load_integration(n).load_crds()];"
        "assert len(crds) >= 4, crds;"
        "import jobframework.testing, uvloop;"
        "print('wheel ok:', len(crds), 'CRDs')"))
    repo = os.path.dirname(os.path.abspath(__file__))
    rendered = os.path.join(tmp, "rendered")
    session.run("python", "-m", "integrations.deploy", "render", "--output", rendered,
                silent=True)
    # The scaffold's templates ship in the wheel.
    session.run("python", "-m", "jobframework.scaffold", "--group", "example.com",
                "--version", "v1", "--kind", "Sample", "--output",
                os.path.join(tmp, "scaffolded"), "--force", silent=True)
    # The installed wheel renders exactly the committed manifests.
    session.run("diff", "-r", rendered, os.path.join(repo, "config", "default"),
                external=True)
