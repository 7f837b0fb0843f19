"""Pod-name hashing is keyed by default: without a configured salt, one is made once in the data
directory and used by every process reading it, so likely pod names hashed by an outsider match
none of the exported hashes."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from audit.telemetry.redaction import SALT_FILE, Redaction, stored_salt

LIKELY_PODS = [f"{job}-{i}" for job in ("train", "infer", "eval", "job", "worker") for i in range(200)]


def test_hashing_without_a_configured_salt_uses_one_kept_in_the_data_directory(tmp_path: Path) -> None:
    env = {"CLAIMTRAIL_OTEL_REDACT": "hash_pod_names", "CLAIMTRAIL_DATA_DIR": str(tmp_path)}
    first, second = Redaction.from_env(env), Redaction.from_env(env)
    assert len(first.salt) == 64 and first.salt == second.salt  # stable across processes and restarts
    path = tmp_path / SALT_FILE
    assert path.read_text().strip() == first.salt and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert Redaction.from_env({**env, "CLAIMTRAIL_DATA_DIR": str(tmp_path / "other")}).salt != first.salt


def test_a_dictionary_of_likely_pod_names_reverses_no_default_hash(tmp_path: Path) -> None:
    keyed = Redaction.from_env({"CLAIMTRAIL_OTEL_REDACT": "hash_pod_names", "CLAIMTRAIL_DATA_DIR": str(tmp_path)})
    exported = {keyed.pod_token(pod) for pod in LIKELY_PODS[::7]}
    unkeyed_dictionary = {Redaction().pod_token(pod) for pod in LIKELY_PODS}
    assert exported & unkeyed_dictionary == set()
    assert {Redaction().pod_token(pod) for pod in LIKELY_PODS[::7]} <= unkeyed_dictionary  # what it was before


@pytest.mark.parametrize(("env", "salt"), [
    ({"CLAIMTRAIL_OTEL_REDACT": "hash_pod_names", "CLAIMTRAIL_OTEL_REDACT_SALT": "mine"}, "mine"),
    ({"CLAIMTRAIL_OTEL_REDACT": "drop_tenant"}, ""),
], ids=["configured-salt-wins", "no-hashing-no-salt"])
def test_a_salt_is_made_only_when_pods_are_hashed_without_one(tmp_path: Path, env: dict[str, str], salt: str) -> None:
    assert Redaction.from_env({**env, "CLAIMTRAIL_DATA_DIR": str(tmp_path)}).salt == salt
    assert not (tmp_path / SALT_FILE).exists()


def test_the_stored_salt_is_read_back_not_remade(tmp_path: Path) -> None:
    (tmp_path / SALT_FILE).write_text("abc\n")
    assert stored_salt(tmp_path) == "abc"
