"""The redactor's known secrets (firstlight/redact.py): masked longest first, so that a secret containing
another never leaks its tail, and masked from 4 characters on (shorter ones would mask ordinary words)."""

from __future__ import annotations

import pytest

from firstlight.redact import MASK, Redactor


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
