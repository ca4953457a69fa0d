"""A container base image made without a registry, from the Debian packages installed on this machine: the files
of Python's packages (its venv module and the wheels ensurepip installs), a shell, coreutils and ``useradd``, and
every package they depend on, as dpkg lists them, in a root filesystem tar for ``podman import``. No compiler is
among them unless a listed package depends on one (the image test checks)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

# and every installed python3.N-venv (Debian's python3 and its venv module, whatever interpreter runs the tests)
ROOTS = ("base-files", "base-passwd", "dash", "bash", "coreutils", "passwd", "libc-bin", "ca-certificates",
         "python3", "python3-minimal", "python3-venv")
DIRS = ("tmp", "proc", "sys", "dev", "root", "run", "var/tmp", "var/lib", "home")


def _query(fmt: str, *packages: str) -> list[str]:
    p = subprocess.run(["dpkg-query", "-W", "-f", fmt, *packages], capture_output=True, text=True, timeout=60)
    return p.stdout.splitlines()


def can_make() -> bool:
    """A Debian machine with Python's venv module installed as a package (what the base is made of)."""
    if shutil.which("dpkg-query") is None:
        return False
    return any(re.fullmatch(r"python3\.\d+-venv ii\s*", line) for line in _query("${Package} ${db:Status-Abbrev}\\n"))


def installed_closure(roots: tuple[str, ...] = ROOTS) -> list[str]:
    """The installed packages ``roots`` depend on (Depends and Pre-Depends, the first installed alternative)."""
    installed = {line.split()[0].split(":")[0] for line in _query("${Package} ${db:Status-Abbrev}\\n")
                 if line.split()[1:2] == ["ii"]}
    seen: set[str] = set()
    todo = [r for r in roots if r in installed] + [p for p in installed if re.fullmatch(r"python3\.\d+-venv", p)]
    while todo:
        pkg = todo.pop()
        if pkg in seen:
            continue
        seen.add(pkg)
        (deps,) = _query("${Depends}, ${Pre-Depends}", pkg) or [""]
        for clause in filter(None, (c.strip() for c in deps.split(","))):
            for alt in clause.split("|"):
                name = re.sub(r"[\s(:].*", "", alt.strip())
                if name in installed:
                    todo.append(name)
                    break
    return sorted(seen)


def write_rootfs(out: Path) -> int:
    """The root filesystem tar; returns how many packages it holds."""
    packages = installed_closure()
    files: set[str] = set()
    listed = subprocess.run(["dpkg", "-L", *packages], capture_output=True, text=True, timeout=120).stdout
    for path in listed.splitlines():
        p = Path(path)
        if path.startswith("/") and (p.is_file() or p.is_symlink()) and not path.startswith("/usr/share/doc"):
            files.add(os.path.join(os.path.realpath(p.parent), p.name))  # merged /usr: /bin/sh is /usr/bin/sh
    with tarfile.open(out, "w") as tar:
        for d in DIRS:
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d in ("tmp", "var/tmp") else 0o755
            tar.addfile(info)
        for path in sorted(files):
            tar.add(path, arcname=path.lstrip("/"), recursive=False)
        for link, target in (("bin", "usr/bin"), ("sbin", "usr/sbin"), ("lib", "usr/lib"), ("lib64", "usr/lib64")):
            if Path(f"/{link}").is_symlink() and f"/{link}" not in files:
                info = tarfile.TarInfo(link)
                info.type, info.linkname = tarfile.SYMTYPE, target
                tar.addfile(info)
        # the accounts and the certificates the package scripts would have written
        for path in ("/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow", "/etc/ssl/certs/ca-certificates.crt",
                     "/etc/login.defs"):
            if Path(path).is_file() and path not in files:  # the accounts as this machine has them
                tar.add(path, arcname=path.lstrip("/"), recursive=False)
    return len(packages)
