"""Secrets never reach output: command lines, log lines, environment."""

from __future__ import annotations

from firstlight.redact import MASK, Redactor


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
