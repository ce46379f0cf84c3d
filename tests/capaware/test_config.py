import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from capcore.config import config_files, config_hash
from capcore.errors import CapawareError
from embedder.config import load_config

ROOT = Path(__file__).resolve().parents[2]


def test_unknown_key_names_key_and_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("train:\n  learning_rate: 0.1\n")
    with pytest.raises(CapawareError) as err:
        load_config(path)
    assert "train.learning_rate" in str(err.value) and str(path) in str(err.value)


def test_mistyped_value_is_an_error():
    with pytest.raises(CapawareError, match="train.batch_size"):
        load_config(None, ["train.batch_size=many"])


@pytest.mark.parametrize("text, line, column", [("stage1: [a, b\n", 2, 1), ("train:\n  epochs: 3\n bad: 1\n", 3, 2)])
def test_a_yaml_syntax_error_is_one_line_with_file_line_and_column(tmp_path, text, line, column):
    """A stage config, its defaults and a pipeline config, each through the command line (issue #58: a 30-49 line
    traceback before)."""
    from capcore.pipeline_config import load_pipeline

    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    variant = tmp_path / "variant.yaml"
    variant.write_text("defaults: [bad.yaml]\nseed: 1\n")
    for load in (lambda: load_config(bad), lambda: load_config(variant), lambda: load_pipeline(str(bad), None)):
        with pytest.raises(CapawareError) as err:
            load()
        said = str(err.value)
        assert said.startswith(f"{bad}: YAML syntax error at line {line}, column {column}: ") and "\n" not in said
    out = subprocess.run([sys.executable, "-m", "capaware", "run", str(bad)], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [f"error: {err.value}"], out.stderr


def test_missing_file():
    with pytest.raises(CapawareError, match="config file not found"):
        load_config("/nonexistent/config.yaml")


def test_overrides_apply_and_change_the_hash():
    base = load_config("configs/demo/demo_pose.yaml")
    other = load_config("configs/demo/demo_pose.yaml", ["train.lr=0.5"])
    assert other.train.lr == 0.5 and base.train.lr != 0.5
    assert config_hash(base) != config_hash(other)
    assert [m.loss for m in base.methods] == ["log_ratio", "triplet", "triplet", "margin"]


def test_a_field_added_later_changes_the_hash_only_when_set():
    """The Transformer's model.layers / heads / ff_size joined the captioner schema after the LSTM runs were made:
    an LSTM config's hash is its YAML without them (the same as before they existed), until one is set."""
    from omegaconf import OmegaConf

    from captioners.config import load_captioner_config

    cfg = load_captioner_config("configs/demo/demo_att2all2.yaml")
    before = OmegaConf.to_container(cfg, resolve=False)
    for key in ("layers", "heads", "ff_size", "standardise", "core_args"):
        del before["model"][key]
    del before["data"]["format"]  # added with the second caption format (issue #48)
    want = hashlib.sha256(OmegaConf.to_yaml(OmegaConf.create(before), sort_keys=True).encode()).hexdigest()[:16]
    assert config_hash(cfg) == want
    assert config_hash(load_captioner_config("configs/demo/demo_att2all2.yaml", ["model.layers=3"])) != want
    assert config_hash(load_captioner_config("configs/demo/demo_att2all2.yaml", ["model.standardise=true"])) != want


def loader_of(name: str):
    """Each shipped config's own validator, by the stage its name says (every file must have one)."""
    name = Path(name).name  # "demo/demo_pose" -> "demo_pose"
    from captioners.config import load_captioner_config
    from feature_extract.config import load_features_config
    from rl.config import load_scst_config

    if name == "declaration_table1_pooled":  # issue #56's declaration: its own schema
        from studies.table1_pooled.declaration import load_declaration as load_pooled

        return load_pooled
    if name == "declaration_self_retrieval":  # issue #66's declaration: its own schema
        from studies.self_retrieval.declaration import load_declaration as load_self_retrieval

        return load_self_retrieval
    if name.startswith("declaration_"):
        from studies.declaration import load_declaration

        return load_declaration
    if name.startswith("pipeline_"):
        return lambda path: subprocess.run([sys.executable, "-m", "capaware.pipeline_plan", str(path), "validate"],
                                           cwd=ROOT, capture_output=True, text=True, check=False)
    if "_features_" in name:
        return load_features_config
    if name.endswith("_scst"):
        return load_scst_config
    if name.endswith("_joint"):
        from joint.config import load_joint_config

        return load_joint_config
    from captioners.core_registry import CORES

    if name.split("_", 1)[1] in CORES:
        return load_captioner_config
    return load_config


CONFIG_FOLDERS = [ROOT / "configs", *sorted((ROOT / "studies").glob("*/configs"))]  # the product's; each study's own
SHIPPED = sorted(str(p.relative_to(ROOT).with_suffix("")) for d in CONFIG_FOLDERS for p in d.rglob("*.yaml"))


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_config_passes_its_own_validator(name):
    path = ROOT / f"{name}.yaml"
    own = loader_of(name)
    result = own(path)
    if Path(name).name.startswith("pipeline_"):  # every stage config it names, with the pipeline's overrides
        assert result.returncode == 0 and "stage configs (with their overrides) valid" in result.stdout, result.stderr
        cfg = yaml.safe_load(path.read_text())  # as many validated as it names, every stage's entries
        named = sum(len(cfg.get(k) or []) for k in ("stage1", "features", "captioners", "joint", "rl"))
        assert int(result.stdout.split()[0]) >= max(1, named), (result.stdout, named)
        return
    accepted = []  # and no other stage's validator takes it: the file belongs to one stage (or to none: a declaration)
    stages = {loader_of(n) for n in ("demo_pose", "demo_att2all2", "demo_att2all2_scst", "demo_features_img",
                                     "demo_joint")}
    for other in stages:
        try:
            other(path)
            accepted.append(other)
        except CapawareError:
            pass
    assert accepted == ([own] if own in stages else []), (name, accepted)


def test_no_shipped_config_says_a_key_was_renamed(capsys, monkeypatch):
    """Issue #65: every shipped config loads through its own loader, and every pipeline's stage entries (with their
    overrides) through their stage's, with nothing printed and no warning: ``make demo``'s features log had said
    "note: ... images.karpathy is now images.captions". The features loader is asked to say so (``note_renamed``),
    as the dump does."""
    import warnings

    from capcore.pipeline_config import Entry, load_pipeline
    from captioners.config import load_captioner_config
    from embedder.config import load_config as load_stage1
    from feature_extract.config import load_features_config
    from joint.config import load_joint_config
    from rl.config import load_scst_config

    monkeypatch.chdir(ROOT)  # pipelines name their stage configs from the checkout
    stage_loaders = {"stage1": load_stage1, "features": load_features_config, "captioners": load_captioner_config,
                     "joint": load_joint_config, "rl": load_scst_config}
    loads = []  # (what, loader, config, overrides)
    for name in SHIPPED:
        path = ROOT / f"{name}.yaml"
        if Path(name).name.startswith("pipeline_"):
            pipeline = load_pipeline(str(path), None)
            loads += [(f"{name}: {text}", loader, e.config, e.overrides) for kind, loader in stage_loaders.items()
                      for text in getattr(pipeline, kind) for e in [Entry.parse(text, pipeline.run_dir)]]
        else:
            loads.append((name, loader_of(name), path, None))
    assert sum(loader is load_features_config for _, loader, _, _ in loads) >= 10
    for what, loader, config, overrides in loads:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if loader is load_features_config:
                loader(config, overrides or [], note_renamed=True)
            else:
                loader(config) if overrides is None else loader(config, overrides)
        printed = capsys.readouterr()
        assert (printed.out, printed.err, [str(w.message) for w in caught]) == ("", "", []), what


def test_configs_live_in_one_folder_per_use():
    """configs/ has the product's folders (demo, paper), each named in configs/README.md; every study's configs
    are in studies/<study>/configs/, named in that study's README; no YAML lies at the top of configs/ (issue #58)."""
    folders = {"demo", "paper"}
    assert not list((ROOT / "configs").glob("*.y*ml"))
    assert {str(Path(n).parent) for n in SHIPPED if n.startswith("configs/")} == {f"configs/{f}" for f in folders}
    studies = {Path(n).parent for n in SHIPPED if not n.startswith("configs/")}
    assert studies and all(d.parts[0] == "studies" and len(d.parts) == 3 and d.name == "configs" for d in studies)
    assert all("configs/" in (ROOT / d.parent / "README.md").read_text() for d in studies)
    stems = [Path(n).name for n in SHIPPED]  # scripts and run folders name a config by its stem
    assert len(stems) == len(set(stems))
    readme = (ROOT / "configs/README.md").read_text()
    assert all(f"`{f}/`" in readme for f in folders) and "studies/<study>/configs/" in readme


def test_a_bad_value_stops_at_load_naming_key_file_and_choices(tmp_path):
    for override, key in (("method.loss=logratio", "method.loss"), ("train.optimizer=adamw", "train.optimizer"),
                          ("model.arch=resnet19", "model.arch"), ("data.format=lsun", "data.format"),
                          ("train.k=200", "train.k")):
        with pytest.raises(CapawareError) as err:
            load_config("configs/demo/demo_pose.yaml", [override])
        assert key in str(err.value) and "configs/demo/demo_pose.yaml" in str(err.value), (override, str(err.value))
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"defaults: [{ROOT / 'configs/demo/demo_pose.yaml'}]\n"
                   "methods: [{name: a, loss: triplet, lr: 0.1}, {name: b, loss: logratio, lr: -1}]\n")
    with pytest.raises(CapawareError, match=r"methods\[1\].loss: unknown value 'logratio' \(and 1 more\).*"
                                            "use one of log_ratio, triplet, margin"):
        load_config(bad)


def test_defaults_compose_a_variant_from_its_base(tmp_path):
    from captioners.config import load_captioner_config

    base = OmegaConf.to_container(load_captioner_config(ROOT / "configs/demo/demo_att2all2.yaml"))
    variant = OmegaConf.to_container(load_captioner_config(ROOT / "configs/demo/demo_topdown.yaml"))
    differ = {(k, sub) for k in base for sub in (base[k] if isinstance(base[k], dict) else [None])
              if (base[k][sub] if sub else base[k]) != (variant[k][sub] if sub else variant[k])}
    assert differ == {("name", None), ("out_dir", None), ("model", "core")}
    (tmp_path / "a.yaml").write_text("defaults: [b.yaml]\ntrain: {lr: 0.5}\n")
    (tmp_path / "b.yaml").write_text("defaults: [a.yaml]\n")
    with pytest.raises(CapawareError, match="defaults include itself"):
        load_config(tmp_path / "a.yaml")
    (tmp_path / "b.yaml").write_text("train: {lr: 0.1, k: 3}\n")
    cfg = load_config(tmp_path / "a.yaml")
    assert (cfg.train.lr, cfg.train.k) == (0.5, 3)  # the including file wins; the base fills the rest
    assert [p.name for p in config_files(tmp_path / "a.yaml")] == ["a.yaml", "b.yaml"]


def test_method_rows_are_named_once_and_expanded_at_load(tmp_path):
    """configs name the paper's rows (embedder.config.PAPER_ROWS) with their own learning rates; a
    variant renames a row or overrides one of its keys; an unknown row is one error line."""
    from embedder.config import PAPER_ROWS

    path = tmp_path / "rows.yaml"
    path.write_text('methods:\n  - {row: "L(Triplet)+M(Binary)", lr: 0.5}\n'
                    '  - {row: "L(Log-ratio)+M(Dense)", name: "LR euclidean", distance: euclidean}\n'
                    '  - {row: "L(Triplet)+M(Dense)", margin: 0.1}\n')
    binary, euclid, dense = load_config(path).methods
    assert (binary.name, binary.loss, binary.mining, binary.margin, binary.lr) == \
        ("L(Triplet)+M(Binary)", "triplet", "binary", 0.2, 0.5)
    assert (euclid.name, euclid.loss, euclid.distance) == ("LR euclidean", "log_ratio", "euclidean")
    assert (dense.mining, dense.margin) == ("dense", 0.1)
    path.write_text('methods:\n  - {row: "L(Triplet)+M(Nothing)"}\n')
    with pytest.raises(CapawareError, match="unknown row"):
        load_config(path)
    for config in sorted(p for d in CONFIG_FOLDERS for p in d.rglob("*.yaml")):  # the rows are written once
        raw = OmegaConf.load(config)
        for m in list(raw.get("methods") or []) + ([raw.method] if "method" in raw else []):
            assert "row" in m and "loss" not in m and "mining" not in m, f"{config.name}: {m}"
    assert {r["loss"] for r in PAPER_ROWS.values()} == {"log_ratio", "triplet", "margin"}


def test_one_row_is_overridden_from_the_command_line_by_place_or_folder_name():
    cfg = load_config("configs/demo/demo_caption.yaml", ["methods.l_log_ratio_m_dense.lr=3e-4", "methods.0.epochs=2"])
    rows = {m.name: m for m in cfg.methods}
    assert rows["L(Log-ratio)+M(Dense)"].lr == 3e-4 and rows["L(Triplet)+M(Dense)"].lr == 3e-4
    assert rows["L(Triplet)+M(Binary)"].epochs == 2.0 and rows["L(Triplet)+M(Binary)"].lr == 1e-4
    assert rows["L(Log-ratio)+M(Dense)"].epochs is None
    cfg = load_config("configs/demo/demo_caption.yaml", ['methods=[{row: "L(Log-ratio)+M(Dense)", lr: 0.0003}]'])
    assert [(m.name, m.loss, m.mining, m.lr) for m in cfg.methods] == [("L(Log-ratio)+M(Dense)", "log_ratio", "dense",
                                                                        3e-4)]


@pytest.mark.parametrize("override,match", [("methods.nope.lr=1", "no row 'nope'.*l_log_ratio_m_dense"),
                                            ("methods.7.lr=1", "no row '7'"),
                                            ("methods.0.lrr=1", "lrr"),
                                            ("methods.0.lr=-1", r"methods\[0\].lr: must be > 0")])
def test_a_bad_row_override_is_one_line(override, match):
    with pytest.raises(CapawareError, match=match):
        load_config("configs/demo/demo_caption.yaml", [override])
