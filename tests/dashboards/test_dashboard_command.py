"""``claimtrail dashboard`` starts Streamlit on the installed app, without the Deploy button."""

from __future__ import annotations

import pytest

from audit.cli.cmd_dashboard import app_path, streamlit_argv
from audit.cli.main import main


def test_the_command_runs_the_packaged_app_headless_and_in_viewer_mode() -> None:
    argv = streamlit_argv("0.0.0.0", 8501)
    assert argv[1:4] == ["-m", "streamlit", "run"]
    assert argv[4] == str(app_path()) and app_path().name == "app.py" and app_path().exists()
    assert argv[5:] == ["--server.address=0.0.0.0", "--server.port=8501", "--server.headless=true",
                        "--browser.gatherUsageStats=false", "--client.toolbarMode=viewer"]


def test_a_bad_port_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dashboard", "--port", "0"]) == 2
    assert capsys.readouterr().err == "claimtrail dashboard: --port 0: expected 1..65535\n"
