"""A rules folder of the user's (issue 48): `tprules rules init DIR`, the settings that choose
the rules of a command given no `--rules` (`--rules` > TPRULES_RULES > `[tool.tprules]` in
pyproject.toml > the packaged rules), `tprules --version`, and the bad input around them:
one line, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FACTS, ROOT, RULES

from tprules import config
from tprules.version import __version__

EXAMPLE = FACTS / "megatron-mlp-tp2"


def legal(cli, *options) -> list[str]:
    status, out, err = cli("check", EXAMPLE, "--format", "json", *options)
    assert (status, err) == (0, ""), err
    return [f["fusion"] for f in json.loads(out)["fusions"] if f["legal"]]


def without_collective_fold(folder: Path) -> Path:
    """A rules folder whose tp.dl lacks the collective_fold rule: mm2_allreduce becomes legal."""
    tp = folder / "tp.dl"
    tp.write_text(tp.read_text().replace('refused(F, "collective_fold") :- member(F, O), is_fold(O), !kernel(F, _).',
                                         ""))
    return folder


@pytest.fixture
def mine(cli, tmp_path):
    """A rules folder written by `tprules rules init`, with the collective_fold rule deleted."""
    status, out, err = cli("rules", "init", tmp_path / "mine")
    assert (status, err) == (0, ""), err
    return without_collective_fold(tmp_path / "mine")


def test_init_copies_the_rules_the_shim_library_and_the_version(cli, tmp_path):
    target = tmp_path / "new" / "rules"
    status, out, err = cli("rules", "init", target)
    assert (status, err) == (0, "")
    assert sorted(p.name for p in target.glob("*.dl")) == sorted(p.name for p in RULES.glob("*.dl"))
    for path in RULES.glob("*.dl"):
        assert (target / path.name).read_text() == path.read_text()
    shims = ROOT / "facts" / "shims"
    assert sorted(p.name for p in (target / "shims").iterdir()) == sorted(p.name for p in shims.glob("*.facts"))
    assert (target / "VERSION").read_text() == f"tprules {__version__}\n"
    assert f"--rules {target}" in out and "TPRULES_RULES" in out and "[tool.tprules]" in out
    assert legal(cli, "--rules", target) == legal(cli)


@pytest.mark.parametrize("what", ["not empty", "a file"])
def test_init_into_a_folder_that_is_not_empty_is_one_line_and_writes_nothing(cli, tmp_path, what):
    target = tmp_path / "taken"
    if what == "a file":
        target.write_text("mine\n")
    else:
        target.mkdir()
        (target / "notes.txt").write_text("mine\n")
    before = sorted(tmp_path.rglob("*"))
    status, out, err = cli("rules", "init", target)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and str(target) in err, err
    assert sorted(tmp_path.rglob("*")) == before


def test_init_into_an_empty_folder_is_fine(cli, tmp_path):
    (tmp_path / "empty").mkdir()
    status, _, err = cli("rules", "init", tmp_path / "empty")
    assert (status, err) == (0, "") and (tmp_path / "empty" / "tp.dl").exists()


def test_the_environment_variable_points_every_command_at_the_folder(cli, mine, monkeypatch):
    assert "mm2_allreduce" not in legal(cli)
    monkeypatch.setenv("TPRULES_RULES", str(mine))
    assert "mm2_allreduce" in legal(cli)
    status, out, _ = cli("plan", EXAMPLE, "--format", "json")  # the planner fuses the fold now (README)
    assert status == 0 and any("allreduce" in g["members"] and len(g["members"]) > 1 for g in json.loads(out)["groups"])
    status, out, _ = cli("lint")
    assert status == 0 and str(mine) in out
    status, out, _ = cli("why", EXAMPLE, 'legal("mm2_allreduce")')
    assert status == 0 and f"{mine}/tp.dl" in out


def test_rules_option_comes_before_the_environment(cli, mine, monkeypatch):
    monkeypatch.setenv("TPRULES_RULES", str(mine))
    assert "mm2_allreduce" not in legal(cli, "--rules", RULES)


def test_pyproject_setting_is_read_from_the_nearest_pyproject(cli, mine, tmp_path, monkeypatch):
    project = tmp_path / "project"
    (project / "src" / "deep").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.tprules]\nrules = "../mine"\n')
    monkeypatch.chdir(project / "src" / "deep")  # a parent's pyproject.toml, relative to itself
    assert "mm2_allreduce" in legal(cli)
    assert config.rules_setting() == (mine, str(project / "pyproject.toml"))
    monkeypatch.setenv("TPRULES_RULES", str(RULES))  # the environment comes before pyproject.toml
    assert "mm2_allreduce" not in legal(cli)


def test_a_pyproject_without_the_setting_leaves_the_default(cli, tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "tprules-user"\n')
    monkeypatch.chdir(tmp_path)
    assert config.rules_setting() == (RULES, "checkout")


@pytest.mark.parametrize("text, says", [('[tool.tprules]\nrule = "x"\n', "no setting 'rule'"),
                                        ('[tool.tprules]\nrules = 3\n', "must be a string"),
                                        ('[tool.tprules\nrules = "x"\n', "not TOML")])
def test_a_bad_pyproject_setting_is_one_line(cli, tmp_path, monkeypatch, text, says):
    (tmp_path / "pyproject.toml").write_text(text)
    monkeypatch.chdir(tmp_path)
    status, out, err = cli("check", EXAMPLE)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"{tmp_path / 'pyproject.toml'}: ") and says in err, err


def test_a_missing_rules_folder_is_one_line_naming_it_and_its_setting(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("TPRULES_RULES", str(tmp_path / "gone"))
    status, out, err = cli("check", EXAMPLE)
    assert (status, out) == (2, "")
    assert err == f"rule error: no such rules folder: {tmp_path / 'gone'} (set by TPRULES_RULES)\n"
    status, _, err = cli("check", EXAMPLE, "--rules", tmp_path / "gone")
    assert status == 2 and err == f"rule error: no such rules folder: {tmp_path / 'gone'}\n"


def test_an_unreadable_rule_file_is_one_line(cli, rules_copy):
    (rules_copy / "broken.dl").symlink_to(rules_copy / "nowhere.dl")
    status, out, err = cli("check", EXAMPLE, "--rules", rules_copy)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and "broken.dl" in err and "cannot read it" in err, err


@pytest.mark.parametrize("text, says", [("tprules 9.9.0\n", "this rules folder is for tprules 9.9.0"),
                                        ("my rules\n", "not a rules folder's version")])
def test_a_rules_folder_of_another_version_is_one_line(cli, mine, monkeypatch, text, says):
    (mine / "VERSION").write_text(text)
    for options, env in (((), True), (("--rules", mine), False)):
        if env:
            monkeypatch.setenv("TPRULES_RULES", str(mine))
        else:
            monkeypatch.delenv("TPRULES_RULES")
        status, out, err = cli("check", EXAMPLE, *options)
        assert status == 2 and out == ""
        assert err.count("\n") == 1 and err.startswith(f"{mine / 'VERSION'}:1: rule error: ") and says in err, err
        status, _, err = cli("lint", *options)
        assert status == 2 and says in err


def test_a_patch_release_reads_the_folder(cli, mine):
    major, minor, *_ = __version__.split(".")
    (mine / "VERSION").write_text(f"tprules {major}.{minor}.99\n")
    assert "mm2_allreduce" in legal(cli, "--rules", mine)


def test_the_folders_own_shim_library_is_read(cli, mine):
    supports = mine / "shims" / "supports.facts"
    supports.write_text(supports.read_text().replace("cuda-lane:h100:Bf16\tadd\tfused", "cuda-lane:h100:Bf16\tadd\talone"))
    status, out, _ = cli("check", EXAMPLE, "--rules", mine, "--format", "json")
    reasons = {f["fusion"]: f["reasons"] for f in json.loads(out)["fusions"]}
    assert status == 0 and reasons["bias_residual"] == ["not_fusible"]
    assert config.shim_library_dir(mine) == mine / "shims"
    assert config.shim_library_dir(RULES) == ROOT / "facts" / "shims"  # rules/ has no shims/ of its own


def test_version_names_the_version_and_where_the_rules_come_from(monkeypatch, tmp_path, capsys):
    from tprules.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    out = capsys.readouterr().out
    assert done.value.code == 0
    assert out == (f"tprules {__version__}\ndefault rules: {RULES} (the checkout tprules runs from)\n"
                   f"shim library: {ROOT / 'facts' / 'shims'}\n")
    monkeypatch.setenv("TPRULES_RULES", str(tmp_path / "gone"))
    with pytest.raises(SystemExit):
        main(["--version"])
    assert f"default rules: {tmp_path / 'gone'} (set by TPRULES_RULES; no such folder)" in capsys.readouterr().out


def test_packaged_rules_are_read_through_importlib_resources(monkeypatch, tmp_path):
    """Installed from a wheel, the package holds defaults/rules and defaults/shims (setup.py
    maps them there) and no checkout lies beside it."""
    from importlib import resources

    site = tmp_path / "site-packages"
    (site / "tprules" / "defaults" / "rules").mkdir(parents=True)
    (site / "tprules" / "defaults" / "shims").mkdir()
    monkeypatch.setattr(config, "PROJECT_ROOT", site)
    monkeypatch.setattr(resources, "files", lambda package: site / package)
    assert config.packaged("rules") == (site / "tprules" / "defaults" / "rules", "packaged")
    assert config.rules_setting() == (site / "tprules" / "defaults" / "rules", "packaged")
    assert config.shim_library_dir() == site / "tprules" / "defaults" / "shims"
    (site / "tprules" / "defaults" / "shims").rmdir()
    with pytest.raises(config.SettingError, match="installed without its shims"):
        config.shim_library_dir()


def test_a_checkout_reads_the_repositorys_folders():
    assert config.packaged("rules") == (RULES, "checkout")
    assert config.packaged("shims") == (ROOT / "facts" / "shims", "checkout")


def test_setup_maps_the_one_copy_of_the_rules_and_the_shims_into_the_package():
    text = (ROOT / "setup.py").read_text()
    assert '"tprules.defaults.rules": "rules"' in text and '"tprules.defaults.shims": "facts/shims"' in text
    assert not (ROOT / "tprules" / "defaults").exists()  # one copy: the repository's own folders
