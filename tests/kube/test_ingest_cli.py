"""``claimtrail ingest kube``: user mistakes are one line naming the option, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.cli.main import main

BAD = {
    "missing_kubeconfig": (["--kubeconfig", "/nonexistent/kubeconfig"], "--kubeconfig /nonexistent/kubeconfig: cannot load"),
    "unknown_context": (["--kubeconfig", "@kubeconfig", "--context", "nope"], "cannot load Kubernetes access"),
    "negative_seq": (["--kubeconfig", "@kubeconfig", "--seq-start", "-1", "--no-leader-election"], "--seq-start: must be >= 0"),
}


@pytest.mark.parametrize(("extra", "message"), list(BAD.values()), ids=list(BAD))
def test_bad_ingest_options_are_reported_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str | None
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: lab\n"
        "clusters: [{name: lab, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: lab, context: {cluster: lab, user: lab}}]\nusers: [{name: lab, user: {}}]\n"
    )
    argv = ["ingest", "kube", "--server", "http://127.0.0.1:9"] + [str(kubeconfig) if a == "@kubeconfig" else a for a in extra]
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("claimtrail ingest: ")
    if message:
        assert message in err
