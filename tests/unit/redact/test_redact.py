"""Secrets never reach output: command lines, log lines, environment.

The in-process tests of this subject; the others: ``tests/e2e/hostile/test_secrets.py``.

The in-process tests of this subject; the others: ``tests/e2e/hostile/test_url_secrets.py``.
"""

from __future__ import annotations

import pytest

from firstlight.redact import MASK, Redactor, redactor_for
from firstlight.timeline import Level, LogLine, Probe, Started


def test_command_line_secrets_are_masked_and_other_options_kept():
    r = Redactor()
    argv = ["sglang", "--api-key", "abcd1234", "--hf-token=hf_zzzzzzzz", "--tokenizer", "tok/path", "--port", "8"]
    r.add_from_argv(argv)
    assert r.argv(argv) == ["sglang", "--api-key", MASK, f"--hf-token={MASK}", "--tokenizer", "tok/path", "--port", "8"]
    assert "abcd1234" not in r.text("the key abcd1234 leaked into a log line")


def test_log_line_patterns():
    r = Redactor()
    line = ("server_args=ServerArgs(api_key='s3cr3t-value', tokenizer_path='m', hf_token='hf_abc', token=None, "
            "max_tokens=5) Authorization: Bearer tok12345 hf_abcdefghijklmnopqrstuvwxyz HF_TOKEN=abcdefg")
    out = r.text(line)
    for secret in ("s3cr3t-value", "hf_abc'", "tok12345", "hf_abcdefghijklmnopqrstuvwxyz", "abcdefg"):
        assert secret not in out
    assert "tokenizer_path='m'" in out and "token=None" in out and "max_tokens=5" in out


def test_environment_secrets():
    r = Redactor()
    r.add_from_env({"OPENAI_API_KEY": "sk-live-123456", "HF_TOKEN": "hf_secretsecret", "PATH": "/usr/bin"})
    assert r.text("using sk-live-123456 and hf_secretsecret in /usr/bin") == f"using {MASK} and {MASK} in /usr/bin"


def test_url_credentials_are_masked_and_learnt():
    r = redactor_for(url="http://alice:pa55word-9@host:8000/v1?api_key=qk-123456&x=1")
    out = r.text("probing http://alice:pa55word-9@host:8000/v1?api_key=qk-123456&x=1")
    assert "pa55word-9" not in out and "qk-123456" not in out
    assert "alice" in out and "host:8000" in out and "x=1" in out
    assert "pa55word-9" not in r.text('{"url": "pa55word-9"}')  # learnt: masked wherever it appears
    fresh = Redactor()  # not learnt: the URL shape alone is enough
    assert fresh.text("GET http://bob:hunter2xyz@h/") == f"GET http://bob:{MASK}@h/"
    assert "tok-98765" not in fresh.text("http://h/x?token=tok-98765")


def test_a_key_inside_a_shell_string_is_learnt():
    argv = ["bash", "-c", "exec python -m sglang.launch_server --model m --api-key shellkey-42 --port 8"]
    r = redactor_for(argv)
    shown = " ".join(r.argv(argv))
    assert "shellkey-42" not in shown and "--port 8" in shown
    assert "shellkey-42" not in r.text("server_args: api key shellkey-42")


def test_plural_multi_value_secret_options():
    argv = ["lmdeploy", "serve", "api_server", "m", "--api-keys", "key-one-1", "key-two-2", "--server-port", "23333"]
    r = redactor_for(argv)
    assert r.argv(argv) == ["lmdeploy", "serve", "api_server", "m", "--api-keys", MASK, MASK, "--server-port",
                            "23333"]
    assert "key-two-2" not in r.text("accepted keys: key-one-1, key-two-2")


def test_flag_values_in_log_lines_are_masked_when_not_known():
    r = Redactor()
    out = r.text("worker cmd: python w.py --hf-token cfgtoken777 --admin-password=pw-from-file --max-tokens 16")
    assert "cfgtoken777" not in out and "pw-from-file" not in out
    assert "--max-tokens 16" in out


def test_code_in_a_traceback_is_not_a_secret():
    r = Redactor()
    for line in ("    items.sort(key=lambda x: x[0])", "    sorted(xs, key=len)", "    best = max(d, key=d.get)",
                 "    sorted(rows, key=operator.itemgetter(1))", "    api_key=None,"):
        assert r.text(line) == line
    assert r.text("key=Zx81abcdEF") == f"key={MASK}"
    assert r.text("api_key='s3cr3t-value'") == f"api_key='{MASK}'"


def test_observations_and_summaries_are_redacted_whole():
    r = redactor_for(api_key="sk-own-key-0123456789")
    probe = Probe(1.0, Level.GENERATION, False, detail='POST /v1/completions -> 401 {"error": "bad header '
                                                       'Authorization: Bearer sk-own-key-0123456789"}')
    assert "sk-own-key" not in r.observation(probe).detail
    assert r.observation(LogLine(1.0, "api_key=abc12345")).text == f"api_key={MASK}"
    started = Started(1.0, url="http://u:pw-9999@h:1")
    assert "pw-9999" not in (r.observation(started).url or "")
    summary = {"url": "http://u:pw-9999@h:1", "evidence": [{"value": "Bearer sk-own-key-0123456789"}],
               "api_key": "plain", "n": 3}
    red = r.data(summary)
    assert "pw-9999" not in str(red) and "sk-own-key" not in str(red) and red["api_key"] == MASK and red["n"] == 3


SECRETS = ("Pa55-admin-word", "ak-0123456789", "tk-9876543210")


def test_the_one_masker_keeps_the_url_readable():
    r = Redactor()
    url = f"http://admin:{SECRETS[0]}@h:1/v1?api_key={SECRETS[1]}&token={SECRETS[2]}&x=1"
    assert r.url(url) == f"http://admin:{MASK}@h:1/v1?api_key={MASK}&token={MASK}&x=1"
    assert r.text(f"see {url}, then") == f"see {r.url(url)}, then"  # text in a line: the same masker


@pytest.mark.parametrize("order", [("wxyz", "abcd1234wxyz"), ("abcd1234wxyz", "wxyz")])
def test_secrets_are_masked_longest_first_so_no_part_of_a_longer_one_leaks(order: tuple[str, str]):
    r = Redactor(order)
    shown = r.text("the server said abcd1234wxyz and then wxyz")
    assert shown == f"the server said {MASK} and then {MASK}", shown
    r = Redactor()
    r.add(order[0])
    r.text("warm the cache")  # the sorted order is cached: a secret added later must still come first if longer
    r.add(order[1])
    assert r.text("value abcd1234wxyz") == f"value {MASK}"


def test_a_secret_inside_a_longer_one_at_its_start_does_not_leak_the_tail():
    r = Redactor(["s3cr", "s3cr3t-tail-9f"])
    assert r.text("x s3cr3t-tail-9f y") == f"x {MASK} y"


@pytest.mark.parametrize("secret", ["k3y9", "k3y9a", "k3y9ab", "k3y9abc"])
def test_secrets_of_4_to_7_characters_are_masked(secret: str):
    for r in (Redactor([secret]), _added(secret)):
        assert r.text(f"value {secret} end") == f"value {MASK} end"


@pytest.mark.parametrize("short", ["", "a", "ab", "abc"])
def test_secrets_under_4_characters_are_not_learnt(short: str):
    r = Redactor([short])
    r.add(short)
    assert r.secrets == set()


def _added(secret: str) -> Redactor:
    r = Redactor()
    r.add(secret)
    return r


def test_a_generations_tokens_are_redacted_one_by_one():
    r = Redactor()
    r.add("hunter2-secret")
    p = Probe(1.0, Level.GENERATION, True, text="x hunter2-secret", tokens=(" x", " hunter2-secret"), logprobs=(-1, -2))
    red = r.observation(p)
    assert red.tokens == (" x", f" {MASK}") and red.logprobs == (-1, -2) and "hunter2" not in red.text
    clean = Probe(1.0, Level.GENERATION, True, text="x", tokens=(" x",))
    assert r.observation(clean) is clean
