"""The suite's PostgreSQL fixture and its CI rule (B-PG-3): a skipped database test fails CI."""

from __future__ import annotations

from pathlib import Path

import pytest

CONFTEST = Path(__file__).with_name("conftest.py")

NO_SERVER_TESTS = """
import pytest

@pytest.mark.postgres
def test_marked():
    raise AssertionError("must not run: no server can be had")

def test_uses_the_fixture(postgres_dsn):
    raise AssertionError("must not run: no server can be had")

def test_unrelated_skip():
    pytest.skip("not a database test")
"""

WITH_SERVER_TESTS = """
import pytest

@pytest.mark.postgres
def test_skips_itself():
    pytest.skip("this database test decided not to run")

@pytest.mark.postgres
@pytest.mark.xfail(reason="a known database bug", strict=True)
def test_expected_failure(postgres_dsn):
    assert False

def test_runs(postgres_dsn):
    assert postgres_dsn
"""


@pytest.fixture
def no_server(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_inner=NO_SERVER_TESTS)
    empty = tmp_path / "no-binaries"
    empty.mkdir()
    monkeypatch.delenv("PULSE_POSTGRES_TEST_DSN", raising=False)
    monkeypatch.setenv("PULSE_POSTGRES_TEST_BINDIR", str(empty))
    return pytester


# covers: B-PG-3
def test_without_a_server_database_tests_are_skipped_with_the_reason(no_server, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    result = no_server.runpytest("-rs")
    # test_uses_the_fixture carries no mark: using the fixture gave it one.
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines(["*holds no initdb and pg_ctl*"])


# covers: B-PG-3
def test_under_ci_a_database_test_without_a_server_fails_the_run(no_server, monkeypatch):
    monkeypatch.setenv("CI", "true")
    result = no_server.runpytest()
    result.assert_outcomes(errors=2, skipped=1)
    assert result.ret != 0
    result.stdout.fnmatch_lines(
        ["*skipped under CI=true, which counts as a failure*holds no initdb and pg_ctl*"]
    )


# covers: B-PG-3
@pytest.mark.parametrize("ci", ["true", ""])
def test_under_ci_a_database_test_that_skips_itself_fails_but_xfail_stays(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, postgres_dsn: str, ci: str
):
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_inner=WITH_SERVER_TESTS)
    monkeypatch.setenv("PULSE_POSTGRES_TEST_DSN", postgres_dsn)
    monkeypatch.setenv("CI", ci)
    result = pytester.runpytest()
    if ci:
        result.assert_outcomes(failed=1, passed=1, xfailed=1)
        result.stdout.fnmatch_lines(["*counts as a failure: this database test decided not*"])
    else:
        result.assert_outcomes(skipped=1, passed=1, xfailed=1)


# covers: B-PG-3
@pytest.mark.postgres
def test_each_database_test_starts_without_the_schema(postgres_dsn):
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        found = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = 'pulse_durable'"
        ).fetchone()
        assert found == (0,)
        conn.execute("CREATE SCHEMA pulse_durable")  # left behind on purpose for the next test


# covers: B-PG-3
@pytest.mark.postgres
def test_the_schema_left_by_the_previous_test_is_gone(postgres_dsn):
    test_each_database_test_starts_without_the_schema(postgres_dsn)
