"""A throwaway PostgreSQL server on 127.0.0.1 for the opt-in scale-out tests.

Uses Debian's ``postgresql`` package (``initdb``, ``pg_ctl`` on PATH or under
``/usr/lib/postgresql/<version>/bin``). PostgreSQL refuses to run as root, so under root the
server runs as the package's ``postgres`` user (``runuser``) from a folder it owns. Trust
authentication on 127.0.0.1 only: a test database, never a deployment (docs/scaling.md).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

USER = "meeple"


def find_binary(name: str) -> str | None:
    """``name`` on PATH, else the newest ``/usr/lib/postgresql/*/bin/<name>``."""
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name)
                      if p.parent.name.isdigit() else 0)
    candidates = [v / name for v in versions if (v / name).is_file()]
    return str(candidates[-1]) if candidates else None


def missing() -> str | None:
    """Why a local server cannot start here (None: it can)."""
    for name in ("initdb", "pg_ctl"):
        if find_binary(name) is None:
            return f"{name} not found: install Debian's postgresql package (apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres user to run the server as"
    try:
        import psycopg  # noqa: F401  (SQLAlchemy 2.1's driver for postgresql:// URLs)
    except ImportError:
        return "psycopg is missing: pip install -e '.[postgres]'"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalPostgres:
    """``start()`` a server with the given databases, ``url(db)``, ``stop()`` (removes everything)."""

    def __init__(self, databases: tuple[str, ...]) -> None:
        self.databases = databases
        self.port = _free_port()
        # Not under pytest's 0700 temp folders: the postgres user must reach the data folder.
        self.root = Path(tempfile.mkdtemp(prefix="meeple-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._as_postgres = os.geteuid() == 0

    def _run(self, *args: str) -> subprocess.CompletedProcess:
        command = ["runuser", "-u", "postgres", "--", *args] if self._as_postgres else list(args)
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = self.log.read_text()[-2000:] if self.log.is_file() else ""
            raise RuntimeError(f"{' '.join(args[:2])} failed ({done.returncode}): {done.stderr[-2000:]}\n{log}")
        return done

    def url(self, database: str) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def start(self) -> LocalPostgres:
        """Initialise, start and create the databases; on any failure stop and remove it all."""
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> LocalPostgres:
        if self._as_postgres:
            shutil.chown(self.root, "postgres")
        self._run(find_binary("initdb"), "-D", str(self.data), "-U", USER, "--auth=trust", "-E", "UTF8")
        options = f"-h 127.0.0.1 -p {self.port} -k {self.root}"  # TCP on loopback, socket in our folder
        self._run(find_binary("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")
        import psycopg

        # CREATE DATABASE cannot run inside a transaction
        with psycopg.connect(self.url("postgres"), autocommit=True) as connection:
            for name in self.databases:
                connection.execute(f'CREATE DATABASE "{name}"')
        return self

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run(find_binary("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
