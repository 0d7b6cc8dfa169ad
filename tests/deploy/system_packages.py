"""The system services the scale-out tests run for real: ``redis-server`` and ``nginx``, from
Debian's packages, installed when missing.

    python -m tests.deploy.system_packages

The test command runs this first (``commands_pre`` in tox.ini), so a fresh machine gets them;
the tests that need them call :func:`ensure` too, for a plain ``pytest`` run. Installing needs
root (as on CI); without it, the message says what to install. Nothing is started here: each
test starts its own server on 127.0.0.1 and stops it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

#: The command each package brings, by package.
PACKAGES = {"redis-server": "redis-server", "nginx": "nginx"}
#: nginx lives in /usr/sbin, which a non-login PATH may lack.
SBIN = ("/usr/sbin", "/sbin")


def find(command: str) -> str | None:
    path = os.environ.get("PATH", "") + os.pathsep + os.pathsep.join(SBIN)
    return shutil.which(command, path=path)


def missing() -> list[str]:
    return [package for package, command in PACKAGES.items() if find(command) is None]


def ensure() -> None:
    """Install whichever of the packages is missing; raises RuntimeError saying what failed."""
    wanted = missing()
    if not wanted:
        return
    if os.geteuid() != 0:
        raise RuntimeError(
            f"the scale-out tests need {' and '.join(wanted)}: install them "
            f"(apt-get install {' '.join(wanted)}) or run the tests as root"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", *wanted]
    done = subprocess.run(install, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        # A fresh machine may have no package lists yet.
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, check=False)
        done = subprocess.run(install, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0 or missing():
        raise RuntimeError(f"could not install {' '.join(wanted)}: {done.stderr[-2000:]}")
    # The packages' own services are not wanted (each test starts its own on a free port).
    service = find("service")
    if service is not None:
        for name in ("redis-server", "nginx"):
            subprocess.run([service, name, "stop"], capture_output=True, check=False)


if __name__ == "__main__":
    try:
        ensure()
    except RuntimeError as error:
        print(error, file=sys.stderr)
        sys.exit(1)
