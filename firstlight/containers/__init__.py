"""A container as the thing watched (Docker and podman): what the runtime says about it (``runtime``: ``inspect``,
``stop``, ``logs``), how a ``docker run`` / ``podman run`` command line is read (``command``), and the watch of
its init process's tree and its log (``watch``).

The server's processes live under the container runtime, not under the CLI that started them: firstlight reads
the container's init PID (``State.Pid``, a host PID), its log through ``RUNTIME logs --follow``, and how it
ended from the runtime's own record (``State.OOMKilled``, ``State.ExitCode``), and stops the container itself.
"""
