"""Base URLs of servers: checked once, so that every request path is joined the same way."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def split_url(url: str) -> tuple[str, int]:
    """Host and port of an http(s) URL; raises ValueError with a readable message (port 0 included: it
    would silently become the scheme's default port)."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"not an http(s) URL: {url!r}")
    if not parts.hostname:
        raise ValueError(f"no host in URL: {url!r}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"bad port in URL: {url!r}") from None
    if port == 0:
        raise ValueError(f"port 0 in URL {url!r}: give the port the server listens on")
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


def normalise_url(url: str) -> str:
    """``url`` with a scheme, checked, without a trailing slash and without a trailing ``/v1``: request paths
    (``/v1/models``, ``/health``) are absolute, so ``http://h:8000/v1`` must not probe ``/v1/v1/models``."""
    url = url.strip()
    url = url if "://" in url else f"http://{url}"
    split_url(url)
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def split_query(url: str) -> tuple[str, str]:
    """``url`` without its query, and the query: a base URL's query (``?api_key=K``) is sent with every request,
    after the request's path (appended to the whole URL, ``/v1/models`` landed inside the query's value)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")), parts.query


def join_url(base: str, path: str) -> str:
    """The URL of ``path`` on the server at ``base``: the path after the base's own path, before its query."""
    root, query = split_query(base)
    return root.rstrip("/") + path + (f"?{query}" if query else "")
