""".ci/run runs what the README says (issue 48): its last line is the README's test command,
verbatim, with pytest's skip summary; before it, the wheel check and the Soufflé set-up."""

from __future__ import annotations

from conftest import ROOT

CI = (ROOT / ".ci" / "run").read_text()


def readme_test_command() -> str:
    """The README's command that sets up and runs the tests (an indented line of its own)."""
    (line,) = [line.strip() for line in (ROOT / "README.md").read_text().splitlines()
               if line.startswith("    ") and "pip install -e '.[test" in line]
    return line


def test_ci_ends_with_the_readmes_test_command_verbatim():
    assert CI.rstrip("\n").splitlines()[-1] == readme_test_command()


def test_the_test_command_ends_with_the_skip_summary():
    # -rs alone would replace pyproject's -ra (pytest's last -r wins) and drop the FAILED lines;
    # -rfEs lists failures, errors, then skips, so the log ends with the skips.
    assert readme_test_command().endswith("python -m pytest -q -rfEs")


def test_ci_runs_the_wheel_check_and_puts_souffle_with_mcpp_on_the_way():
    assert "\n.ci/wheel_check.sh\n" in CI and (ROOT / ".ci" / "wheel_check.sh").stat().st_mode & 0o111
    assert "mcpp" in CI and "../shared/tools/souffle/bin" in CI
    wheel = (ROOT / ".ci" / "wheel_check.sh").read_text()
    for command in ("--version", "check facts/megatron-mlp-tp2 >", "--format json", " why ", " plan ",
                    " run facts/megatron-mlp-tp2 --device cpu", "rules init", "-m build"):
        assert command in wheel, command


def test_ci_runs_tests_frontends_on_the_newest_transformers_the_import_extra_allows():
    """The suite runs on the range's floor; .ci/newest_transformers.sh, before the README's
    command, runs tests/frontends in a venv of its own on the release below the ceiling."""
    import re

    assert "\n.ci/newest_transformers.sh\n" in CI and (ROOT / ".ci" / "newest_transformers.sh").stat().st_mode & 0o111
    lane = (ROOT / ".ci" / "newest_transformers.sh").read_text()
    (newest,) = re.findall(r"^NEWEST=(\d+)\.(\d+)$", lane, re.M)
    (spec,) = re.findall(r'"transformers>=(\d+)\.(\d+),<(\d+)\.(\d+)"', (ROOT / "pyproject.toml").read_text())
    floor, ceiling = (int(spec[0]), int(spec[1])), (int(spec[2]), int(spec[3]))
    assert floor < (int(newest[0]), int(newest[1])) < ceiling == (int(newest[0]), int(newest[1]) + 1)
    assert "pytest -q -rfEs -p no:cacheprovider tests/frontends" in lane


def test_the_suite_installs_the_floor_of_the_transformers_range():
    # pip takes the newest release a range allows; the suite runs on the floor (constraints.txt),
    # the lane above on the ceiling
    import re

    (spec,) = re.findall(r'"transformers>=(\d+)\.(\d+),<', (ROOT / "pyproject.toml").read_text())
    pins = [line for line in (ROOT / "constraints.txt").read_text().splitlines() if line and not line.startswith("#")]
    assert pins == [f"transformers=={spec[0]}.{spec[1]}.0"]
    assert " -c constraints.txt && " in readme_test_command()
