"""Developer sessions: `nox -s tests`, `nox -s lint`, `nox -s integration`, `nox -s demo`."""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = "3.11"


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Unit tests on the in-memory API server."""
    session.install("-e", ".[test]")
    session.run("pytest", "-q", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff and mypy --strict on src/."""
    session.install("-e", ".[lint,test]")
    session.run("ruff", "check", "src", "tests", "noxfile.py")
    session.run("mypy", "src")
