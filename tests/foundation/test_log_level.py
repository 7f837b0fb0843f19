"""``--log-level``: the four level names in any case, and anything else refused with the choices."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from audit.cli.main import main
from audit.logs import setup_logging


@pytest.fixture(autouse=True)
def _keep_the_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:], root.level = handlers, level


@pytest.mark.parametrize(("given", "level"), [
    pytest.param("DEBUG", logging.DEBUG, id="upper-case"),
    pytest.param("info", logging.INFO, id="lower-case"),
    pytest.param("Error", logging.ERROR, id="mixed-case"),
])
def test_a_level_name_in_any_case_sets_that_level(capsys: pytest.CaptureFixture[str], given: str, level: int) -> None:
    assert main(["--log-level", given, "schema"]) == 0
    assert logging.getLogger().level == level


@pytest.mark.parametrize("given", [
    pytest.param("bogus", id="unknown-name"),
    pytest.param("", id="empty"),
    pytest.param("10", id="number"),
])
def test_any_other_level_is_refused_with_the_choices(capsys: pytest.CaptureFixture[str], given: str) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--log-level", given, "schema"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --log-level: {given!r}: expected one of DEBUG, INFO, WARNING, ERROR" in err
    assert "Traceback" not in err


def test_setup_logging_never_falls_back_to_a_level_it_was_not_given() -> None:
    with pytest.raises(ValueError, match="unknown log level 'verbose'"):
        setup_logging("verbose")
