import logging
import shutil

import pytest

from sqleval_pipeline.demo import location
from sqleval_pipeline.configs import ConfigError, Configuration, config_version, load_config, load_configs

CLAUDE = """\
name: c1
generator:
  kind: anthropic
  model: claude-x
context:
  prompt_template: evals/prompts/p.j2
  retrieval_k: 4
runs: 3
"""
REORDERED = """\
# same configuration, other layout
runs: 3
context: {retrieval_k: 4, prompt_template: evals/prompts/p.j2}
generator: {model: claude-x, kind: anthropic}   # inline
name: c1
"""


@pytest.fixture()
def root(tmp_path):
    (tmp_path / "evals" / "prompts").mkdir(parents=True)
    (tmp_path / "evals" / "prompts" / "p.j2").write_text("Question: {{ question }}\n")
    return tmp_path


def write(root, text, name="c.yaml"):
    p = root / name
    p.write_text(text)
    return p


def test_reformatting_the_yaml_keeps_the_version(root):
    a = load_config(write(root, CLAUDE, "a.yaml"), root)
    b = load_config(write(root, REORDERED, "b.yaml"), root)
    assert a.version == b.version and len(a.version) == 8
    assert a.partition_key == f"c1@{a.version}"


def test_changing_the_prompt_file_changes_the_version(root):
    before = load_config(write(root, CLAUDE), root).version
    (root / "evals" / "prompts" / "p.j2").write_text("Question (v2): {{ question }}\n")
    after = load_config(write(root, CLAUDE), root).version
    assert before != after


def test_changing_retrieval_k_changes_the_version_but_not_concurrency(root):
    base = load_config(write(root, CLAUDE), root).version
    assert load_config(write(root, CLAUDE.replace("retrieval_k: 4", "retrieval_k: 5")), root).version != base
    assert load_config(write(root, CLAUDE + "concurrency: 32\n"), root).version == base
    assert load_config(write(root, CLAUDE + "judge: none\nbaseline: other\nactive: false\n"), root).version == base
    assert load_config(write(root, CLAUDE.replace("runs: 3", "runs: 5")), root).version != base


def test_the_glossary_content_is_part_of_a_curated_version(tmp_path):
    from sqleval_pipeline.semantic import glossary_digest
    from sqleval_pipeline.project import load_project

    g = tmp_path / "glossary.yml"
    shutil.copy(location.REPO_ROOT / "dbt_project" / "glossary.yml", g)
    (tmp_path / "sqleval.yaml").write_text("name: t\nas_of: 2024-01-31\npaths: {glossary: glossary.yml}\n")
    project = load_project(tmp_path)
    cfg = Configuration(name="b", generator={"kind": "baseline"})
    before_digest = glossary_digest(project)
    before = config_version(cfg, tmp_path, before_digest)
    g.write_text(g.read_text() + "\n# a comment changes nothing a system is fed\n")
    assert glossary_digest(project) == before_digest
    g.write_text(g.read_text().replace("Gross revenue minus discounts", "Gross revenue less discounts"))
    after_digest = glossary_digest(project)
    assert after_digest != before_digest
    assert config_version(cfg, tmp_path, after_digest) != before
    raw = Configuration(name="b", generator={"kind": "baseline"}, context={"curation": False})
    assert config_version(raw, tmp_path, before_digest) == config_version(raw, tmp_path, after_digest)


def test_fewer_than_three_runs_needs_an_explicit_override(root, caplog):
    with pytest.raises(ConfigError, match="below the floor of 3"):
        load_config(write(root, CLAUDE.replace("runs: 3", "runs: 1")), root)
    with caplog.at_level(logging.WARNING):
        cfg = load_config(write(root, CLAUDE.replace("runs: 3", "runs: 1\nallow_fewer_runs: true")), root)
    assert cfg.config.runs == 1
    assert "only 1 time" in caplog.text


def test_errors_name_file_line_and_field(root):
    p = write(root, CLAUDE.replace("retrieval_k: 4", "retrieval_k: many"))
    with pytest.raises(ConfigError) as exc:
        load_config(p, root)
    assert f"{p}:7: field 'context.retrieval_k'" in str(exc.value)
    p = write(root, CLAUDE.replace("kind: anthropic", "kind: gpt"))
    with pytest.raises(ConfigError, match="generator"):
        load_config(p, root)
    p = write(root, CLAUDE.replace("  model: claude-x\n", ""))
    with pytest.raises(ConfigError, match=r"field 'generator.model': Field required"):
        load_config(p, root)


def test_a_missing_prompt_file_is_named(root):
    p = write(root, CLAUDE.replace("p.j2", "nope.j2"))
    with pytest.raises(ConfigError, match="prompt_template file .*nope.j2.* does not exist"):
        load_config(p, root)


def test_the_judge_is_never_the_generating_model():
    with pytest.raises(ValueError, match="judge_model must differ"):
        Configuration(name="x", generator={"kind": "anthropic", "model": "m1"}, judge="llm",
                      judge_model="m1")


@pytest.mark.slow  # curated configurations version the demo's semantic layer: its dbt manifest
def test_committed_configurations_load(session_home):
    configs = load_configs(location.EVALS_DIR / "configs")
    kinds = {c.config.generator.kind for c in configs}
    assert {"baseline", "anthropic", "openai"} <= kinds
    assert len({c.partition_key for c in configs}) == len(configs) >= 4
    offline = [c for c in configs if c.config.generator.kind == "baseline"]
    assert {c.config.context.curation for c in offline} == {True, False}


@pytest.mark.slow  # curated configurations version the demo's semantic layer: its dbt manifest
def test_a_duplicate_name_is_the_later_file_s_error_and_the_rest_runs(session_home, tmp_path):
    from sqleval_pipeline.project import load_project

    project = load_project(location.REPO_ROOT)
    folder = tmp_path / "configs"
    folder.mkdir()
    base = "generator: {kind: baseline}\nruns: 3\n"
    (folder / "a.yaml").write_text("name: same\n" + base)
    (folder / "b.yaml").write_text("name: same\n" + base + "context: {curation: true}\n")
    (folder / "c.yaml").write_text("name: other\n" + base)
    errors: list[str] = []
    loaded = load_configs(folder, project=project, errors=errors)
    assert [c.path.name for c in loaded] == ["a.yaml", "c.yaml"]
    assert len(errors) == 1 and str(folder / "b.yaml") in errors[0] and str(folder / "a.yaml") in errors[0]
    with pytest.raises(ConfigError, match="b.yaml"):
        load_configs(folder, project=project)
