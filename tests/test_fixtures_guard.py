"""Setup item 14: without ../shared/fixtures the tests that read it skip with a reason; under CI the run fails."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests import conftest

SSE_FILES: list[str] = []  # what `fixture_files(...)` gives a module without the fixtures


def reads_the_list() -> None:
    assert SSE_FILES


def pure() -> None:
    assert 1 + 1 == 2


def item(function: Any) -> Any:
    return SimpleNamespace(function=function, iter_markers=lambda name: [])


def test_item14_only_tests_that_read_the_fixtures_are_picked_out() -> None:
    assert conftest._reads_fixtures(item(reads_the_list))
    assert not conftest._reads_fixtures(item(pure))
    globals()["fixture_files"] = conftest.fixture_files
    try:
        def direct() -> None:
            fixture_files("x")  # type: ignore[name-defined]  # noqa: F821

        assert conftest._reads_fixtures(item(direct))
    finally:
        del globals()["fixture_files"]


def test_item14_absent_fixtures_skip_with_the_reason_or_fail_under_ci(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:
    monkeypatch.setattr(conftest, "FIXTURES", tmp_path / "absent")
    monkeypatch.setattr(conftest, "IN_CI", False)
    with pytest.raises(pytest.skip.Exception, match="recorded provider streams"):
        conftest.fixture_path("anthropic/x.sse")
    conftest.pytest_sessionstart(None)  # type: ignore[arg-type]  # nothing to say outside CI
    monkeypatch.setattr(conftest, "IN_CI", True)
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        conftest.fixture_path("anthropic/x.sse")
    with pytest.raises(pytest.exit.Exception, match="CI=true, but the recorded provider fixtures are missing"):
        conftest.pytest_sessionstart(None)  # type: ignore[arg-type]
