"""The redactor's rules at their edges, each on a bare ``Redactor`` (one that learned nothing, so a rule cannot
pass only because the secret was learned elsewhere): how many values after a secret option are hidden, what a
secret query parameter, URL userinfo, token and traceback look like, and what is left alone. Named by the
mutation run of firstlight/redact.py."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from firstlight.redact import MASK, Redactor, is_secret_name, redactor_for


def test_a_secret_option_hides_exactly_its_one_value():
    assert Redactor().argv(["srv", "--api-key", "K1", "model.gguf", "--port", "8"]) == [
        "srv", "--api-key", MASK, "model.gguf", "--port", "8"]


def test_a_plural_secret_option_hides_every_value_up_to_the_next_option():
    assert Redactor().argv(["srv", "--api-keys", "K1", "K2", "K3", "--port", "8"]) == [
        "srv", "--api-keys", MASK, MASK, MASK, "--port", "8"]


def test_a_secret_option_with_equals_is_masked_whole_even_with_an_equals_or_comma_in_its_value():
    assert Redactor().argv(["--api-key=ab=cd", "--hf-token=ab,cd", "x"]) == [
        f"--api-key={MASK}", f"--hf-token={MASK}", "x"]


def test_argv_learns_secret_values_from_the_first_argument_on():
    r = Redactor()
    r.add_from_argv(["--api-key=sekrit1"])
    assert r.secrets == {"sekrit1"}
    r = Redactor()
    r.add_from_argv(["--api-key", "sekrit2", "serve"])
    assert r.secrets == {"sekrit2"}


def test_a_url_teaches_its_secret_query_values():
    r = Redactor()
    r.add_from_url("http://127.0.0.1:8/v1?api_key=abcdef&model=m")
    assert r.secrets == {"abcdef"}
    assert r.text("echoed abcdef") == f"echoed {MASK}"


def test_the_run_redactor_learns_the_given_environment_and_firstlights_own_key():
    r = redactor_for(["srv"], api_key="own-key-1234", env={"HF_TOKEN": "envsecret99"})
    assert r.text("own-key-1234 envsecret99") == f"{MASK} {MASK}"


def test_a_quoted_name_is_a_secret_name_and_a_name_ending_otherwise_is_not():
    assert is_secret_name('"api_key"') and is_secret_name("'token' ")
    assert not is_secret_name("MY_TOKENX")


def test_code_in_a_traceback_is_not_a_secret():
    r = Redactor()
    assert r.text("token=lambda x: x[0]") == "token=lambda x: x[0]"
    assert r.text("token=make_token(x)") == "token=make_token(x)"
    assert r.text("token=abcdef1234") == f"token={MASK}"


def test_a_secret_query_value_with_an_equals_is_masked_whole():
    assert Redactor().url("http://h:8/v1?api_key=a=b&x=1") == f"http://h:8/v1?api_key={MASK}&x=1"


def test_url_userinfo_every_shape():
    r = Redactor()
    assert r.url("http://a@b:pw12@host:8/") == f"http://a@b:{MASK}@host:8/"  # the last @ ends the userinfo
    assert r.url("http://user:pa:ss@host:8/") == f"http://user:{MASK}@host:8/"  # the first : ends the user
    assert r.url("http://tok123@host:8/") == f"http://{MASK}@host:8/"  # a lone userinfo is a token


def test_a_url_urlsplit_rejects_still_has_its_password_and_known_secrets_masked():
    r = Redactor(["tokentoken"])
    assert r.url("http://u:pw12@[::1/x?q=tokentoken") == f"http://u:{MASK}@[::1/x?q={MASK}"


def test_a_bearer_token_in_text_is_masked():
    assert Redactor().text("Authorization: Bearer abc.def-123") == f"Authorization: Bearer {MASK}"


def test_data_masks_only_secret_named_keys_and_keeps_lists():
    r = Redactor()
    assert r.data({"name": "plain", "token": "abcd", "empty_token": "", "l": ["x", 1]}) == {
        "name": "plain", "token": MASK, "empty_token": "", "l": ["x", 1]}


@dataclass(frozen=True)
class _Obs:
    message: str = ""
    command: str = ""
    path: str = ""
    other: str = ""


def test_observation_fields_message_command_path_are_redacted_others_not():
    r = Redactor(["sekrit99"])
    got = r.observation(_Obs("m sekrit99", "c sekrit99", "p sekrit99", "o sekrit99"))
    assert got == _Obs(f"m {MASK}", f"c {MASK}", f"p {MASK}", "o sekrit99")


def test_observation_leaves_what_is_not_an_observation_and_returns_an_unchanged_one_as_is():
    r = Redactor(["sekrit99"])
    assert r.observation(_Obs) is _Obs
    assert r.observation("sekrit99") == "sekrit99"
    clean = _Obs("nothing")
    assert r.observation(clean) is clean


@pytest.mark.parametrize("name", ["sslpassword", "PGPASSWORD", "SSLPASSWORD", "db_passwords", "KEY_PASSPHRASE",
                                  "passphrase", "sshpasswd"])
def test_a_name_ending_in_a_password_word_is_secret_even_glued(name: str):
    assert is_secret_name(name)
    assert Redactor().text(f"{name}=Hunter2pw") == f"{name}={MASK}"
    learned = Redactor()
    learned.add_from_env({name: "Hunter2pw"})
    assert learned.text("connecting with Hunter2pw") == f"connecting with {MASK}"


@pytest.mark.parametrize("name", ["monkey", "ntoken", "password_file", "passwords_dir", "tokenizer"])
def test_a_glued_key_or_token_or_a_password_file_is_not_secret(name: str):
    assert not is_secret_name(name)
