"""What a simulated start needs on the machine: a free port (one no other test process takes at the same
moment) and weight files on disk of a given size, as safetensors shards with real headers."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

_PORT_LOCK_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / "firstlight-ports"
_PORT_LOCKS: list[int] = []  # descriptors of the port reservations this process holds (until it exits)


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (for the demo, tests and benchmarks), that cannot race: it lies
    below the kernel's ephemeral range (where every outgoing connection takes its source port, so a port from
    there can be taken between this call and the server's bind), and it is reserved for this process by a lock
    file, so parallel test workers never get the same one."""
    import fcntl
    import random
    import socket

    low, top = 20000, _ephemeral_low()
    if top - low >= 1000:
        _PORT_LOCK_DIR.mkdir(exist_ok=True)
        for port in random.sample(range(low, top), 200):
            fd = os.open(_PORT_LOCK_DIR / f"{port}.lock", os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            try:
                with socket.socket() as s:
                    s.bind((host, port))
            except OSError:
                os.close(fd)
                continue
            _PORT_LOCKS.append(fd)
            return port
    with socket.socket() as s:  # no room below the ephemeral range: the kernel's choice
        s.bind((host, 0))
        return int(s.getsockname()[1])


def make_weights(directory: Path, total_bytes: int, shards: int = 4) -> list[Path]:
    """Sparse safetensors files of ``total_bytes`` in all: real files to read, nothing to write. Each holds a
    valid safetensors header (one U8 tensor filling the file), so a checkpoint check finds them complete."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(shards):
        p = directory / f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        size = total_bytes // shards
        header, previous = b"", None
        while len(header) != previous:  # the header's length changes the data length it states; settle it
            previous, data = len(header), size - 8 - len(header)
            text = json.dumps({f"layer{i}.weight": {"dtype": "U8", "shape": [data], "data_offsets": [0, data]}})
            header = text.encode().ljust(-(-len(text) // 8) * 8)
        with open(p, "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header)
            f.truncate(size)
        paths.append(p)
    return paths
