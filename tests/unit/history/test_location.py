"""Where the history lives: a path is a SQLite file, a postgresql:// URL the fleet's database; a URL's secrets are
masked everywhere; the node's name; the spool's folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from firstlight import settings
from firstlight.cli.options import HistoryLocation
from firstlight.history import History, Unreachable
from firstlight.history.location import exists, is_url, mask, node, password_from_file, secrets, spool_dir, where

URL = "postgresql://fleet:Hunter2-pw@db.example:5432/firstlight?sslmode=require&sslpassword=KeyPass9&password=Q1"


@pytest.mark.parametrize(("value", "url"), [
    ("postgresql://h/db", True), ("postgres://u@h/db", True), ("POSTGRESQL://h/db", True),
    ("/var/lib/firstlight/history.sqlite3", False), ("history.db", False), ("mysql://h/db", False),
    ("postgresql:/h/db", False),
])
def test_a_postgresql_url_is_the_shared_database_and_anything_else_a_file(value: str, url: bool):
    assert is_url(value) is url
    assert isinstance(where(value), str if url else Path)


def test_a_url_keeps_its_double_slash_where_a_path_would_fold_it():
    assert where("postgresql://u@h:5/db") == "postgresql://u@h:5/db"
    assert where("~/h.db") == Path.home() / "h.db"


def test_the_password_and_every_secret_of_the_query_are_masked():
    shown = mask(URL)
    for secret in ("Hunter2-pw", "KeyPass9", "Q1"):
        assert secret not in shown
    assert shown.startswith("postgresql://fleet:***@db.example:5432/firstlight?")
    assert "sslmode=require" in shown and "sslpassword=***" in shown and "password=***" in shown
    assert {"Hunter2-pw", "KeyPass9", "Q1"} <= set(secrets(URL))


def test_a_percent_encoded_password_is_masked_as_written_and_as_meant():
    url = "postgresql://u:p%40ss@h/db"
    assert "p%40ss" not in mask(url) and {"p%40ss", "p@ss"} <= set(secrets(url))


def test_a_path_is_shown_as_it_is():
    assert mask(Path("/tmp/h.db")) == "/tmp/h.db"


def test_a_database_always_exists_a_file_only_when_it_does(tmp_path: Path):
    assert exists("postgresql://h/db")
    assert not exists(tmp_path / "none.db")


def test_the_password_file_gives_its_first_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    f = tmp_path / "pw"
    f.write_text("from-a-secret\nignored\n")
    monkeypatch.setenv("FIRSTLIGHT_HISTORY_PASSWORD_FILE", str(f))
    assert password_from_file() == "from-a-secret"
    monkeypatch.setenv("FIRSTLIGHT_HISTORY_PASSWORD_FILE", str(tmp_path / "missing"))
    assert password_from_file() is None


def test_the_node_is_firstlight_node_else_the_host_name(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FIRSTLIGHT_NODE", "gpu-node-7")
    assert node() == "gpu-node-7"
    monkeypatch.delenv("FIRSTLIGHT_NODE")
    import socket

    assert node() == socket.gethostname()


def test_the_spool_is_under_the_state_dir_and_never_named_by_the_password(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    a = spool_dir("postgresql://u:one@h:5432/db")
    assert a == spool_dir("postgresql://u:two@h:5432/db")  # the same database whatever the password
    assert a != spool_dir("postgresql://u:one@h:5432/other")
    assert a.is_relative_to(tmp_path / "firstlight" / "spool")


def test_the_history_option_and_the_settings_keep_a_url_as_text():
    assert HistoryLocation().convert("postgres://u@h/db", None, None) == "postgres://u@h/db"
    assert HistoryLocation().convert("h.db", None, None) == Path("h.db")
    assert settings.history(path="postgresql://u@h/db").path == "postgresql://u@h/db"


def test_a_url_selects_the_shared_database_and_a_refusal_leaves_the_run_to_the_spool(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    url = "postgresql://fleet:Hunter2-pw@127.0.0.1:1/db"  # nothing listens on port 1: refused at once
    with History(url) as h:
        assert h.shared and h.unreached is not None
        assert "Hunter2-pw" not in h.unreached and "Hunter2-pw" not in str(h.path)
        with pytest.raises(Unreachable):
            h.runs()
    with History(tmp_path / "h.db") as f:
        assert not f.shared and f.unreached is None and f.runs() == []
