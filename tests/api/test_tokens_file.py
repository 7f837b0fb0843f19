"""The tokens file: hashed tokens map to one tenant or admin; mistakes name the entry and field."""

from __future__ import annotations

import pytest

from audit.api.auth import ADMIN, AuthConfig, Principal, Redaction, hash_token, parse_tokens, redact_record
from audit.errors import UserError
from tests.api import factory

TEAM_A = "token-team-a"
TOKENS = {"tokens": [{"token_sha256": hash_token(TEAM_A), "tenant": "team-a"},
                     {"token": "root-token", "admin": True}],
          "redaction": {"hash_pod_names": True}}


def test_hash_token_is_sha256_hex() -> None:
    assert hash_token("test") == "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"


@pytest.mark.parametrize(("header", "expected"), [
    (f"Bearer {TEAM_A}", Principal(tenant="team-a")),
    (f"bearer {TEAM_A}", Principal(tenant="team-a")),
    ("Bearer root-token", ADMIN),
    ("Bearer wrong", None),
    (f"Basic {TEAM_A}", None),
    ("Bearer ", None),
    (None, None),
], ids=["tenant", "scheme-case", "admin", "unknown-token", "other-scheme", "empty-token", "no-header"])
def test_bearer_header_maps_to_principal(header: str | None, expected: Principal | None) -> None:
    assert parse_tokens(TOKENS).authenticate(header) == expected


def test_clear_tokens_are_not_kept_in_memory() -> None:
    config = parse_tokens(TOKENS)
    assert "root-token" not in repr(config)
    assert hash_token("root-token") in config.principals


def test_insecure_local_makes_everyone_admin() -> None:
    assert AuthConfig(insecure_local=True).authenticate(None) == ADMIN


@pytest.mark.parametrize(("doc", "message"), [
    ([{"tenant": "a"}], "tokens[0]: exactly one of token_sha256 or token is required"),
    ([{"token": "x", "token_sha256": "0" * 64, "tenant": "a"}], "tokens[0]: exactly one of token_sha256 or token"),
    ([{"token_sha256": "abc", "tenant": "a"}], "tokens[0].token_sha256: expected 64 hex characters"),
    ([{"token": "x"}], "tokens[0]: give exactly one of tenant or admin: true"),
    ([{"token": "x", "tenant": "a", "admin": True}], "tokens[0]: give exactly one of tenant or admin: true"),
    ([{"token": "x", "admin": "yes"}], "tokens[0].admin: expected true or false"),
    ([{"token": "x", "tenant": "a", "role": "r"}], "tokens[0].role: unknown field"),
    ([{"token": "x", "tenant": "a"}, {"token": "x", "tenant": "b"}], "tokens[1]: the same token is listed twice"),
    ([], "no tokens defined"),
    ("just text", "expected a list of tokens or a mapping"),
    ({"tokens": [{"token": "x", "admin": True}], "redaction": {"hash_pods": True}}, "redaction.hash_pods: unknown field"),
    ({"tokens": [{"token": "x", "admin": True}], "redaction": {"salt": 5}}, "redaction.salt: expected a string"),
], ids=["no-token", "both-tokens", "short-digest", "no-role", "both-roles", "admin-not-bool", "unknown-field",
        "duplicate", "empty", "not-a-list", "unknown-redaction", "salt-not-text"])
def test_bad_tokens_file_names_the_entry_and_field(doc: object, message: str) -> None:
    with pytest.raises(UserError) as err:
        parse_tokens(doc, "tokens.yaml")
    assert message in str(err.value)
    assert str(err.value).startswith("tokens file tokens.yaml")


def test_redaction_hashes_pod_names_everywhere_and_drops_details() -> None:
    shown = redact_record(factory.FALLBACK, Redaction(hash_pod_names=True, drop_labels=True))
    assert shown["pod"].startswith("sha256:")
    assert "train-1" not in str(shown)  # the claim name train-1-gpu included
    assert shown["tiers"][0]["exemplars"][0]["detail"] == {}
    assert shown["decision_id"] == factory.FALLBACK.decision_id
    assert factory.FALLBACK.pod == "train-1"  # the stored record is untouched


def test_a_salt_makes_pod_tokens_keyed() -> None:
    plain = redact_record(factory.FALLBACK, Redaction(hash_pod_names=True))["pod"]
    salted = redact_record(factory.FALLBACK, parse_tokens({**TOKENS, "redaction": {
        "hash_pod_names": True, "salt": "s3"}}).redaction)["pod"]
    assert plain != salted and salted.startswith("sha256:")


def test_explanations_for_non_admins_lose_pod_names_and_device_details() -> None:
    from audit.api.auth import pod_hash, redact_explanation

    body = {"pod": "team-a/train-1", "summary": "H100 skipped for train-1.",
            "devices": [{"device": "d", "node": "n", "reason": "node_filtered",
                         "detail": {"detail": "nodeSelector zone=a"}}]}
    shown = redact_explanation(body, "train-1", Redaction(hash_pod_names=True, drop_labels=True))
    assert shown["pod"] == f"team-a/{pod_hash('train-1')}"
    assert "train-1" not in shown["summary"]
    assert shown["devices"][0]["detail"] == {}
    assert redact_explanation(body, "train-1", Redaction()) is body
