"""``claimtrail validate``: one line per finding, JSON output, exit codes and unreadable input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from audit.cli.main import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dra" / "validate"
REPO = Path(__file__).resolve().parents[2]


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["validate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_valid_file_exits_zero_and_prints_no_findings(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "-f", str(FIXTURES / "valid-cluster.yaml"))
    assert (code, out) == (0, "")
    assert err == "8 objects checked, 0 findings\n"


def test_findings_are_printed_one_per_line_and_exit_one(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "-f", str(FIXTURES / "claim-too-many-subrequests.yaml"))
    assert code == 1
    assert out == ("ResourceClaim default/train-0: spec.devices.requests[0].firstAvailable[9]: "
                   "too many subrequests (max 8)\n")
    assert err == "1 object checked, 1 finding\n"


def test_several_files_are_checked_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "-f", str(FIXTURES / "claim-too-many-subrequests.yaml"),
                        "-f", str(FIXTURES / "class-mistakes.yaml"))
    lines = out.splitlines()
    assert code == 1
    assert len(lines) == 8
    assert lines[0].startswith("ResourceClaim default/train-0: ")
    assert all(line.startswith(("DeviceClass ", "DeviceTaintRule ")) for line in lines[1:])


def test_json_output_lists_object_path_and_message(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "-f", str(FIXTURES / "claims-list.json"), "-o", "json")
    assert code == 1
    assert json.loads(out) == [{
        "object": "ResourceClaim serving/infer-1",
        "path": "spec.devices.requests[0].exactly.count",
        "message": "Invalid value: -1: must be greater than zero",
    }]


def test_json_output_of_valid_input_is_an_empty_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "-f", str(FIXTURES / "valid-cluster.yaml"), "-o", "json")
    assert (code, json.loads(out)) == (0, [])


@pytest.mark.parametrize(("name", "message"), [
    ("broken.yaml", "claimtrail validate: broken.yaml: invalid YAML: expected ',' or '}', but got ':' (line 4, column 7)\n"),
    ("does-not-exist.yaml", None),
], ids=["bad-yaml", "missing-file"])
def test_unreadable_input_is_a_one_line_error_with_exit_two(capsys: pytest.CaptureFixture[str], name: str,
                                                             message: str | None) -> None:
    code, out, err = _run(capsys, "-f", str(FIXTURES / name))
    assert (code, out) == (2, "")
    assert "Traceback" not in err and err.count("\n") == 1
    if message is not None:
        assert err == message
    else:
        assert err.startswith("claimtrail validate: ") and "does-not-exist.yaml: cannot read file" in err


def test_installed_command_reports_findings() -> None:
    done = subprocess.run([sys.executable, "-m", "audit.cli.main", "validate", "-f",
                           str(FIXTURES / "slice-mistakes.yaml")], capture_output=True, text=True, cwd=REPO, check=False)
    assert done.returncode == 1
    assert len(done.stdout.splitlines()) == 15
    assert done.stderr == "1 object checked, 15 findings\n"


def test_objects_of_other_kinds_are_counted_as_not_checked(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    manifest = tmp_path / "mixed.yaml"
    manifest.write_text((FIXTURES / "claim-too-many-subrequests.yaml").read_text()
                        + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n")
    code, out, err = _run(capsys, "-f", str(manifest))
    assert code == 1 and len(out.splitlines()) == 1
    assert err == ("1 object checked, 1 finding; not checked (kinds other than DeviceClass, DeviceTaintRule, Node, "
                   "Pod, ResourceClaim, ResourceClaimTemplate, ResourceSlice): ConfigMap\n")


def test_an_object_defined_twice_is_named_and_each_copy_checked(capsys: pytest.CaptureFixture[str]) -> None:
    valid = str(FIXTURES / "valid-cluster.yaml")
    code, out, err = _run(capsys, "-f", valid, "-f", valid)
    lines = err.splitlines()
    assert (code, out, lines[-1]) == (0, "", "16 objects checked, 0 findings")
    assert len(lines) == 9 and all(
        line.startswith("warning: valid-cluster.yaml#") and "is also defined in valid-cluster.yaml#" in line
        and line.endswith("; each is checked, and a cluster read from these files keeps the later")
        for line in lines[:-1])
