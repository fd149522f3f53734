"""Stage keys and the runner's decisions (edit_lib/runner/keys.py, runner.run.decide): what re-runs a stage, and why.

Most tests check the computed keys and decisions against a run folder whose results JSON files are written here
as a finished run leaves them, so no notebook is executed.
"""
import ast
import copy
import dataclasses
import json
import shutil

import pytest

import edit_lib.fingerprints as fp
import edit_lib.runner.keys as keys
import edit_lib.runner.run as rn
import edit_lib.runner.stage as pl
from edit_lib.artifacts import RunPaths, write_json
from edit_lib.config import ConfigError, load_profile
from edit_lib.runner.stage import FIXED, KNOBS
from edit_lib.runner.keys import STAGES, ProfileView, UndeclaredSectionError, leaf_diff, stage_inputs, why

SMOKE = "smoke"


def _record(root, prof, names=None, memo=None):
    """Results JSON files and executed-notebook copies as a finished run of ``prof`` leaves them (``memo``: the
    profile's keys already computed, as ``stage_inputs`` keeps them)."""
    paths = RunPaths.for_profile(prof.name, root)
    memo = {} if memo is None else memo
    for name in names or pl.available_stages():
        key, inputs = stage_inputs(prof, name, pl.NOTEBOOK_DIR, memo)
        write_json(paths.results_file(name), dict(notebook=name, key=key, artifact_key=key, inputs=inputs,
                                                  notebook_sha=pl.notebook_sha(name), reused_stale=False,
                                                  warnings=[], skipped=[], tables={}))
        paths.notebooks.mkdir(parents=True, exist_ok=True)
        (paths.notebooks / f"{name}.ipynb").write_text("{}")
    return paths


def _plan(root, prof, **kw):
    paths = RunPaths.for_profile(prof.name, root)
    return {d.stage: d for d in rn.decide(prof, paths, pl.available_stages(), **kw)}


def _closure(name, prof=None):
    """Files a stage's key covers: its notebook's closure and the providers the profile selects."""
    return set(keys.module_fingerprints(pl.NOTEBOOK_DIR / f"{name}.ipynb", prof or load_profile(SMOKE), name))


# ------------------------------------------------------------------ data and parameter changes

@pytest.mark.slow
def test_data_change_reruns_every_downstream_stage(tmp_path):
    base = load_profile(SMOKE)
    changed = load_profile(SMOKE, ["data.datasets.synth_sas.options.n_questions=12"])
    names = pl.available_stages()
    assert len(names) >= 2
    memo, memo_changed = {}, {}  # one per profile: each stage's key computed once (module closures take seconds)
    for name in names:
        assert pl.stage_key(base, name, memo) != pl.stage_key(changed, name, memo_changed), name
    _record(tmp_path, base, memo=memo)
    assert {d.action for d in _plan(tmp_path, base, memo=memo).values()} == {"cached"}
    plan = _plan(tmp_path, changed, memo=memo_changed)
    assert plan["00_data"].action == "run"
    assert plan["00_data"].why == "parameters changed: data.datasets.synth_sas.options.n_questions"
    for name in names[1:]:
        assert plan[name].action == "run", name
        for up in STAGES[name].upstream:
            assert f"upstream {up} changed" in plan[name].why
    # `--only 00_data` with the new data: 01's recorded results no longer match what 00 shows; said so
    from edit_lib.book.build import stage_executed_notebooks

    paths = _record(tmp_path, changed, ["00_data"], memo_changed)
    assert rn.mismatched_upstream(paths) == {"01_base_policy": ["00_data"]}
    index = (stage_executed_notebooks(SMOKE, str(tmp_path)) / "executed" / "index.md").read_text()
    assert "INCONSISTENT" in index.split("01_base_policy")[1]
    from edit_lib.runner.dry_run import dry_run  # the variant's dry run says so too, not 'new' (its own folder)
    plan = dry_run(SMOKE, ["data.datasets.synth_sas.options.n_questions=12"], ["00_data"], str(tmp_path))["plan"]
    assert [(p["action"], p["why"]) for p in plan] == [("main", "same key, read from there")]
    log: list[str] = []  # the new data as a variant: its 00 is the one the main run recorded, read from there
    rn.run(SMOKE, only=["00_data"], run_root=str(tmp_path), log=log.append,
           overrides=["data.datasets.synth_sas.options.n_questions=12"])
    assert log[0].startswith("variant data.datasets.synth_sas.options.n_questions=12 of ")
    assert log[1].startswith("[1/1] 00_data: the main run's") and len(log) == 2  # nothing executes


@pytest.mark.notebook
def test_smoke_run_is_fresh_and_a_data_change_reruns_all_of_it(smoke_run):
    """On the executed smoke run: nothing is stale; a data override re-runs every stage."""
    run_dir, _ = smoke_run
    plan = _plan(run_dir.parent, load_profile(SMOKE))
    assert {n: d.action for n, d in plan.items()} == {n: "cached" for n in pl.available_stages()}
    plan = _plan(run_dir.parent, load_profile(SMOKE, ["data.datasets.synth_sas.options.n_questions=12"]))
    assert {d.action for d in plan.values()} == {"run"}


def _leaves(value, prefix):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{prefix}.{k}")
    elif isinstance(value, list) and value and all(isinstance(x, dict) and "name" in x for x in value):
        for x in value:
            yield from _leaves({k: v for k, v in x.items() if k != "name"}, f"{prefix}.{x['name']}")
    else:
        yield prefix, value


def _perturb(v):
    if isinstance(v, bool):
        return not v
    if isinstance(v, (int, float)):
        return v + 1
    if isinstance(v, str):
        return v + "_x"
    if isinstance(v, (list, tuple)):
        return type(v)([*v, "x"])
    return {**v, "x": 1}


def _set(prof, path, value):
    """A copy of ``prof`` with the value at a dotted path (datasets addressed by name) replaced."""
    prof = copy.deepcopy(prof)
    parts = path.split(".")
    node = prof
    for part in parts[:-1]:
        if isinstance(node, list):
            node = next(x for x in node if x.name == part)
        elif isinstance(node, dict):
            node = node[part]
        else:
            node = getattr(node, part)
    if isinstance(node, dict):
        node[parts[-1]] = value
    else:
        setattr(node, parts[-1], value)
    return prof


def rec_key(prof, name):
    return stage_inputs(prof, name, pl.NOTEBOOK_DIR)[0]


def test_every_declared_value_changes_the_key_and_is_named(monkeypatch):
    monkeypatch.setattr(keys, "module_fingerprints", lambda nb, *a: {})  # parameters only: fast
    monkeypatch.setattr(keys, "weights_fingerprint", lambda name, commit="": "w" + commit)
    base = load_profile(SMOKE)
    via_weights = {f"{s}.{v}" for s, vs in keys.WEIGHTS_VALUES.items() for v in vs}  # model.hub_commit
    for name in pl.available_stages():
        _, rec = stage_inputs(base, name, pl.NOTEBOOK_DIR)
        n = 0
        for decl in STAGES[name].sections:
            for path, value in _leaves(base.section(decl), decl):
                changed = _set(base, path, _perturb(value))
                key, inputs = stage_inputs(changed, name, pl.NOTEBOOK_DIR)
                if path.startswith("model.warmup.") and path != "model.warmup.steps":
                    # smoke trains no warm-up, so its values change nothing (keyed_warmup): no key moves
                    assert key == stage_inputs(base, name, pl.NOTEBOOK_DIR)[0], (name, path)
                    continue
                if path in ("model.generation_workers", "sft.workers"):  # no number moves (COUNT_VALUES)
                    assert key == stage_inputs(base, name, pl.NOTEBOOK_DIR)[0], (name, path)
                    continue
                if path == "rl.workers":  # smoke's 0 -> 1: the runs leave the engine's units for the notebook
                    assert ("parameters", ["rl.runs_on_engine"]) in why(dict(inputs=rec), inputs), name
                    counts = [stage_inputs(_set(load_profile(SMOKE), path, n), name, pl.NOTEBOOK_DIR)[0]
                              for n in (0, 2, 16)]
                    assert len(set(counts)) == 1 and counts[0] != key, name  # how many units: no
                    n += 1
                    continue
                assert key != stage_inputs(base, name, pl.NOTEBOOK_DIR)[0], (name, path)
                reason = ("weights", None) if path in via_weights else ("parameters", [path])
                assert reason in why(dict(inputs=rec), inputs), (name, path)
                n += 1
        assert n >= len(STAGES[name].sections)
    # values a stage does not declare (nor its upstream) leave its key alone
    for name, other in [("00_data", "probe.temperature"), ("02_probing", "audit.batch_size"),
                        ("02_probing", "selection.shortlist_k"), ("03_audit_validation", "probe.temperature"),
                        ("01_base_policy", "run.description")]:
        if name in pl.available_stages():
            changed = _set(base, other, _perturb(base.section(other)))
            assert pl.stage_key(changed, name) == pl.stage_key(base, name), (name, other)


def _profile_reads(nb_path):
    """Dotted profile paths a notebook reads directly (``P.x.y`` or ``ctx.profile.x.y``)."""
    tree = ast.parse(fp.notebook_source(nb_path))
    reads, smoke = set(), load_profile(SMOKE)
    for node in ast.walk(tree):
        chain, cur = [], node
        while isinstance(cur, ast.Attribute):
            chain.append(cur.attr)
            cur = cur.value
        chain.reverse()
        if isinstance(cur, ast.Name) and cur.id == "P":
            pass
        elif isinstance(cur, ast.Name) and cur.id == "ctx" and chain[:1] == ["profile"]:
            chain = chain[1:]
        else:
            continue
        # keep the part of the chain that names profile fields
        obj, path = smoke, []
        for attr in chain:
            if not dataclasses.is_dataclass(obj) or attr not in {f.name for f in dataclasses.fields(obj)}:
                break
            path.append(attr)
            obj = getattr(obj, attr)
        if path and path != ["name"]:
            reads.add(".".join(path))
    return reads


@pytest.mark.slow
def test_every_profile_read_of_a_notebook_is_declared():
    for name in pl.available_stages():
        reads = _profile_reads(pl.NOTEBOOK_DIR / f"{name}.ipynb")
        decl = STAGES[name].sections
        for r in reads:
            assert keys._allows(decl, r), f"{name} reads {r}, not declared in {decl}"
    assert "selection.tie_margin" in _profile_reads(pl.NOTEBOOK_DIR / "02_probing.ipynb")


def test_undeclared_read_raises(tmp_path):
    ctx = pl.stage("02_probing", SMOKE, [], str(tmp_path))
    P = ctx.profile
    assert P.selection.tie_margin == 0.05 and P.run.seed == 0 and P.name == SMOKE
    assert type(P.probe).__name__ == "ProbeConfig"  # library functions get the real section
    for read in (lambda: P.audit, lambda: P.run.description, lambda: P.selection.shortlist_k,
                 lambda: P.section("rl")):
        with pytest.raises(UndeclaredSectionError) as e:
            read()
        msg = str(e.value)
        assert "02_probing" in msg and "edit_lib/runner/keys.py" in msg and "declare" in msg
    with pytest.raises(UndeclaredSectionError, match="'audit'"):
        P.audit
    with pytest.raises(AttributeError):
        P.probe_typo
    with pytest.raises(AttributeError):
        P.seed = 3


def test_view_hands_partial_sections_out_as_views():
    prof = load_profile(SMOKE)
    v = ProfileView(prof, "00_data", ("run.seed", "data"))
    assert isinstance(v.run, ProfileView) and v.run.seed == prof.run.seed
    assert v.data is prof.data and v.section("run.seed") == prof.run.seed
    with pytest.raises(UndeclaredSectionError):
        v.section("run")


# ------------------------------------------------------------------ library code and weights

def test_relative_and_lazy_imports_are_followed():
    tree = ast.parse("from ..data import schema\nfrom . import packing\nimport numpy\n"
                     "def f():\n    from .probe import x\n")
    assert fp.imported_names(tree, "edit_lib.signals") == {
        "edit_lib.data", "edit_lib.data.schema", "edit_lib.signals", "edit_lib.signals.packing",
        "edit_lib.signals.probe", "edit_lib.signals.probe.x"}
    c02 = _closure("02_probing")
    assert {"edit_lib/signals/probe.py", "edit_lib/signals/packing.py", "edit_lib/signals/__init__.py"} <= c02
    assert "edit_lib/embedded/recipe.py" in _closure("01_base_policy")  # imported inside policy.load_policy
    assert not any(f.startswith(("edit_lib/signals/", "edit_lib/embedded/")) for f in _closure("00_data"))
    assert not {"edit_lib/runner/stage.py", "edit_lib/runner/keys.py"} & c02  # the runner is not part of a key


def test_a_key_covers_every_imported_module_outside_the_runner_layer():
    """The one rule (edit_lib/fingerprints.py): every edit_lib module a notebook imports, transitively, except
    runner/, tools/, book/ and cli; the runner layer and those above it are never in a key."""
    for name in pl.available_stages():
        nb = pl.NOTEBOOK_DIR / f"{name}.ipynb"
        files = set(fp.module_closure(nb))
        assert not any(f.startswith(("edit_lib/runner/", "edit_lib/tools/", "edit_lib/book/"))
                       or f == "edit_lib/cli.py" for f in files), name
        direct = {m for m in fp.imported_names(ast.parse(fp.notebook_source(nb)), "") if not fp.in_runner_layer(m)}
        for m in direct:
            f = fp._module_file(m)
            if f is not None:
                assert str(f.relative_to(fp.REPO_ROOT)) in files, (name, m)


def test_a_key_covers_the_providers_its_profile_selects():
    """analysis.step_annotator = synthetic puts the synthetic annotator's code in 03's key; 'none' leaves it out."""
    on = _closure("03_audit_validation")
    off = _closure("03_audit_validation", load_profile(SMOKE, ["analysis.step_annotator=none"]))
    assert "edit_lib/embedded/annotate.py" in on and "edit_lib/embedded/annotate.py" not in off
    assert "edit_lib/embedded/error_analysis.py" in _closure("07_evaluation")
    assert "edit_lib/embedded/error_analysis.py" not in _closure(
        "07_evaluation", load_profile(SMOKE, ["analysis.error_analysis=none"]))


@pytest.fixture
def repo_copy(tmp_path, monkeypatch):
    """A copy of edit_lib's sources that the fingerprints read instead of the real one."""
    root = tmp_path / "repo"
    shutil.copytree(fp.REPO_ROOT / "edit_lib", root / "edit_lib",
                    ignore=shutil.ignore_patterns("__pycache__", "assets", "runs"))
    monkeypatch.setattr(fp, "REPO_ROOT", root)
    return root


def _touch(root, rel):
    f = root / rel
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text((f.read_text() if f.exists() else "") + "\n# edited\n")


@pytest.mark.slow
def test_library_change_marks_dependent_stages_stale(tmp_path, repo_copy):
    prof = load_profile(SMOKE)
    runs = tmp_path / "runs"
    _record(runs, prof)
    names = pl.available_stages()
    only03 = sorted(_closure("03_audit_validation") - _closure("02_probing"))
    assert only03, "03 imports modules that 02 does not (signals/audit_summary.py)"
    _touch(repo_copy, only03[0])
    plan = _plan(runs, prof)
    assert plan["03_audit_validation"].action == "run"
    assert plan["03_audit_validation"].why == f"library changed: {only03[0]}"
    # stages downstream of 03 (04 reads its audit) re-run through their upstream key, the others stay cached
    down = {"03_audit_validation"}
    for n in names:  # stage order: a stage is downstream when any of its upstream stages is
        if any(u in down for u in keys.STAGES[n].upstream):
            down.add(n)
    down.discard("03_audit_validation")
    assert all(plan[n].action == "run" for n in down)
    assert all(plan[n].action == "cached" for n in names if n != "03_audit_validation" and n not in down)
    # independent code: a module no notebook imports, and the runner itself
    _record(runs, prof)
    _touch(repo_copy, "edit_lib/train/rl_new_module.py")
    _touch(repo_copy, "edit_lib/runner/stage.py")
    assert {d.action for d in _plan(runs, prof).values()} == {"cached"}
    # a module 02 and 03 share but 01 does not: both stale, 00 and 01 not
    shared = sorted((_closure("02_probing") & _closure("03_audit_validation")) - _closure("01_base_policy"))
    assert shared, "02 and 03 share signal modules that 01 does not import (signals/tables.py)"
    _touch(repo_copy, shared[0])
    plan = _plan(runs, prof)
    after = {"02_probing", "03_audit_validation"}
    for n in names:  # everything downstream of them, directly or not (04, then 05, 06)
        if after & set(keys.STAGES[n].upstream):
            after.add(n)
    after -= {"02_probing", "03_audit_validation"}
    assert [n for n in names if plan[n].action == "run"] == ["02_probing", "03_audit_validation",
                                                             *sorted(after)]  # and what reads them (04 on)
    assert plan["02_probing"].why == f"library changed: {shared[0]}"


@pytest.mark.slow
def test_weights_change_marks_model_stages_stale(tmp_path, monkeypatch):
    real = keys.weights_fingerprint
    monkeypatch.setenv("EDIT_SUITE_CACHE", str(tmp_path / "cache"))
    prof = load_profile(SMOKE)
    _record(tmp_path, prof)
    monkeypatch.setattr(keys, "weights_fingerprint", lambda name, commit="": "micro:other")
    plan = _plan(tmp_path, prof)
    assert plan["00_data"].action == "cached"
    assert plan["01_base_policy"].why == "model weights changed"
    local = tmp_path / "model"
    local.mkdir()
    (local / "w.bin").write_bytes(b"abc")
    a = real(str(local))
    (local / "w.bin").write_bytes(b"abcd")
    assert real(str(local)) != a and a.startswith("dir:")
    assert real("Qwen/Qwen3-8B") == "hub:Qwen/Qwen3-8B"
    from edit_lib.embedded import recipe

    shipped = tmp_path / "embedded" / "assets" / "grader"  # 'embedded' hashes the files the policy loader reads
    shutil.copytree(recipe.ASSETS_DIR, shipped)
    monkeypatch.setattr(recipe, "ASSETS_DIR", shipped)
    before = real("embedded")
    (shipped / "config.json").write_text((shipped / "config.json").read_text() + " ")
    assert real("embedded") != before


@pytest.mark.slow
def test_reuse_stale_is_explicit_recorded_and_shown(tmp_path, repo_copy):
    from edit_lib.book.build import stage_executed_notebooks

    prof = load_profile(SMOKE)
    runs = tmp_path / "runs"
    paths = _record(runs, prof)
    old01 = json.loads(paths.results_file("01_base_policy").read_text())["key"]
    only01 = sorted(_closure("01_base_policy") - _closure("02_probing") - _closure("03_audit_validation"))
    assert only01, "01 imports modules 02 and 03 do not (rollouts.py)"
    _touch(repo_copy, only01[0])
    # by default library changes re-run the stage and everything downstream
    assert [d.action for d in _plan(runs, prof).values()][1:] == ["run"] * (len(pl.available_stages()) - 1)
    plan = _plan(runs, prof, reuse_stale=True)
    assert plan["01_base_policy"].action == "reuse" and plan["02_probing"].action == "reuse"
    log: list[str] = []
    status = rn.run(SMOKE, run_root=str(runs), reuse_stale=True, log=log.append)
    assert [s["status"] for s in status][:2] == ["cached", "reused_stale"]
    assert any("STALE" in line and "01_base_policy" in line for line in log)
    res = json.loads(paths.results_file("01_base_policy").read_text())
    assert res["reused_stale"] is True and res["stale_modules"] == [only01[0]]
    assert res["key"] == pl.stage_key(prof, "01_base_policy") != old01 and res["artifact_key"] == old01
    assert json.loads(paths.results_file("02_probing").read_text())["stale_upstream"] == ["01_base_policy"]
    # downstream notebooks read the old artifacts and say so
    paths.stage_dir("01_base_policy", old01).mkdir(parents=True)
    ctx = pl.stage("02_probing", SMOKE, [], str(runs))
    assert ctx.upstream("01_base_policy") == paths.stage_dir("01_base_policy", old01)
    assert any("--reuse-stale" in w for w in ctx.warnings)
    # the book's run page shows it; a plain run recomputes it
    index = (stage_executed_notebooks(SMOKE, str(runs)) / "executed" / "index.md").read_text()
    assert "STALE" in index and only01[0] in index
    assert _plan(runs, prof)["01_base_policy"].action == "run"


def test_upstream_check_names_what_changed(tmp_path):
    """The main run's 01 was recorded with other values (its profile file edited since): 02 says which."""
    _record(tmp_path, load_profile(SMOKE, ["rollouts.n_per_response=3"]), ["00_data", "01_base_policy"])
    ctx = pl.stage("02_probing", SMOKE, [], str(tmp_path))
    with pytest.raises(FileNotFoundError, match="parameters changed: rollouts.n_per_response"):
        ctx.upstream("01_base_policy")


# ------------------------------------------------------------------ small pieces

def test_leaf_diff_hand_cases():
    old = {"a": 1, "b": {"c": 2, "d": [1, 2]}, "ds": [{"name": "x", "o": {"n": 1}}, {"name": "y", "o": {}}]}
    new = {"a": 1, "b": {"c": 3, "d": [1, 2, 3]}, "ds": [{"name": "y", "o": {}}, {"name": "x", "o": {"n": 2}}],
           "e": 0}
    assert leaf_diff(old, new) == ["b.c", "b.d", "ds.x.o.n", "e"]
    assert leaf_diff(old, copy.deepcopy(old)) == []


def test_overrides_accept_papermill_strings():
    assert pl.parse_overrides('["probe.temperature=0.5", "run.seed=3"]') == ["probe.temperature=0.5", "run.seed=3"]
    assert pl.parse_overrides("[probe.temperature=0.5]") == ["probe.temperature=0.5"]  # YAML flow list
    assert pl.parse_overrides("probe.temperature=0.5") == ["probe.temperature=0.5"]
    assert pl.parse_overrides("") == [] and pl.parse_overrides(None) == [] and pl.parse_overrides("[]") == []
    with pytest.raises(ConfigError, match="overrides"):
        pl.parse_overrides("{probe: 1}")


def test_parameters_cells_parse_cleanly_under_papermill(caplog):
    import logging

    import nbformat
    from papermill.translators import PythonTranslator

    for name in pl.available_stages():
        nb = nbformat.read(pl.NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)
        cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(cells) == 1, name
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            params = PythonTranslator.inspect(cells[0])
        assert not [r for r in caplog.records if "Unable to parse" in r.getMessage()], name
        assert [p.name for p in params] == [*FIXED, *KNOBS[name]], name


def test_profile_file_anywhere(tmp_path):
    f = tmp_path / "my.yaml"
    f.write_text((pl.CONFIG_DIR / "smoke.yaml").read_text())
    assert load_profile(str(f)).name == "my"
    assert RunPaths.for_profile(load_profile(str(f)).name, tmp_path / "runs").root == tmp_path / "runs" / "my"
    assert pl.profile_argument(SMOKE) == SMOKE
    assert pl.profile_argument(str(f)) == str(f.resolve())
    with pytest.raises(ConfigError, match="does not exist"):
        load_profile(str(tmp_path / "nope.yaml"))


def test_cache_folder_is_outside_the_repository(tmp_path, monkeypatch):
    from edit_lib.artifacts import cache_dir
    from edit_lib.embedded.recipe import micro_cache_dir

    monkeypatch.delenv("EDIT_SUITE_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert fp.REPO_ROOT.resolve() not in cache_dir().resolve().parents
    monkeypatch.setenv("EDIT_SUITE_CACHE", str(tmp_path / "c"))
    assert micro_cache_dir().parent == tmp_path / "c"


def test_real_data_file_edited_in_place_reruns_00(tmp_path):
    """The profile names only a path: the key must also cover the file's contents."""
    qf, rf = tmp_path / "q.jsonl", tmp_path / "r.jsonl"
    qf.write_text('{"id": "q1", "text": "t", "max_mark": 2, "scheme": {"kind": "free_text", "text": "x"}}\n')
    rf.write_text('{"id": "r1", "question_id": "q1", "answer": "a", "gold": 1, "split": "train"}\n')
    prof_file = tmp_path / "mine.yaml"
    prof_file.write_text(f"data:\n  datasets:\n    - name: mine\n      source: jsonl\n"
                         f"      options: {{questions: {qf}, responses: {rf}}}\nmodel: {{name_or_path: micro}}\n")
    prof = load_profile(str(prof_file))
    key0, inputs0 = stage_inputs(prof, "00_data", pl.NOTEBOOK_DIR)
    assert "mine" in inputs0["data_files"]
    rf.write_text('{"id": "r1", "question_id": "q1", "answer": "a", "gold": 2, "split": "train"}\n')
    key1, inputs1 = stage_inputs(load_profile(str(prof_file)), "00_data", pl.NOTEBOOK_DIR)
    assert key1 != key0
    assert keys.describe_reason(*why(dict(inputs=inputs0), inputs1)[0]) == "data files changed: mine"


def test_a_tuple_valued_parameter_is_not_reported_as_changed():
    """The results JSON stores tuples as lists; `why` compares as the key hashes (JSON), so no false reason."""
    from edit_lib.runner.keys import why
    inputs = {"params": {"int_sft": {"index_words": ("point", "step")}}, "upstream": {}, "modules": {},
              "weights": None, "data_files": {}}
    recorded = {"inputs": {"params": {"int_sft": {"index_words": ["point", "step"]}}, "upstream": {}, "modules": {},
                           "weights": None, "data_files": {}}}
    assert why(recorded, inputs) == []
    recorded["inputs"]["params"]["int_sft"]["index_words"] = ["point"]
    assert why(recorded, inputs) == [("parameters", ["int_sft.index_words"])]


def test_an_analysis_choice_reruns_only_the_stages_that_use_it(monkeypatch):
    """analysis.* are stage inputs of their own: the error analysis is 07's (08 and 09 follow through 07's key),
    the step annotator 03-05's; the stages before them keep their keys."""
    monkeypatch.setattr(keys, "module_fingerprints", lambda nb, *a: {})  # parameters only: fast
    base = load_profile(SMOKE)
    for override, first in (("analysis.error_analysis=none", "07_evaluation"),
                            ("analysis.step_annotator=none", "03_audit_validation")):
        changed = load_profile(SMOKE, [override])
        names = pl.available_stages()
        same = [n for n in names if pl.stage_key(base, n) == pl.stage_key(changed, n)]
        assert same == names[:names.index(first)], (override, same)


def test_a_pinned_hub_commit_changes_the_weights_fingerprint_only():
    """model.hub_commit (a hub model's pinned commit) joins the weights fingerprint: another commit, or none, is
    other weights; a named Base ignores it (its own id says what it is)."""
    hub = "Qwen/Qwen3-8B"
    fingerprints = {keys.weights_fingerprint(hub, c) for c in ("", "0123abc", "4567def")}
    assert len(fingerprints) == 3
    assert keys.weights_fingerprint(hub, "") == "hub:" + hub  # unset: as before the value existed
    assert keys.weights_fingerprint("micro", "0123abc") == keys.weights_fingerprint("micro")


def test_an_unset_hub_commit_stays_out_of_every_stage_keys_params(monkeypatch):
    """Left unset, model.hub_commit is in no stage's hashed parameters (keys stay as they were before it existed);
    set, it moves only the weights of the stages that load the model, never their parameters."""
    monkeypatch.setattr(keys, "module_fingerprints", lambda nb, *a: {})  # parameters only: fast
    unset = load_profile(SMOKE, ["model.name_or_path=Qwen/Qwen3-8B"])
    pinned = load_profile(SMOKE, ["model.name_or_path=Qwen/Qwen3-8B", "model.hub_commit=0123abc"])
    model_stages = [n for n in pl.available_stages() if "model" in STAGES[n].sections]
    assert model_stages
    for name in model_stages:
        _, a = stage_inputs(unset, name, pl.NOTEBOOK_DIR)
        _, b = stage_inputs(pinned, name, pl.NOTEBOOK_DIR)
        assert "hub_commit" not in a["params"]["model"] and "hub_commit" not in b["params"]["model"], name
        assert a["params"] == b["params"], name
        assert (a["weights"], b["weights"]) == ("hub:Qwen/Qwen3-8B", "hub:Qwen/Qwen3-8B@0123abc"), name


def test_warm_up_values_that_train_nothing_move_no_key(monkeypatch):
    """model.warmup in the keys (model.warmup.keyed_warmup): a profile without a warm-up hashes its values as they
    were (the defaults: keys as before), so a value that changes nothing moves no key; with a warm-up, role_steps
    moves the keys only where a separate reviser trains it."""
    monkeypatch.setattr(keys, "module_fingerprints", lambda nb, *a: {})  # parameters only: fast
    base = load_profile(SMOKE)
    # hub_commit is hashed via the weights, generation_workers nowhere (a count of workers)
    model = {k: v for k, v in base.section("model").items() if k not in ("hub_commit", "generation_workers")}
    assert keys.hashed_params(base, ("model",))["model"] == model  # the warm-up at its defaults: as before
    names = pl.available_stages()

    def same(a, b):
        return [n for n in names if pl.stage_key(load_profile(SMOKE, a), n) == pl.stage_key(load_profile(SMOKE, b), n)]
    assert same([], ["model.warmup.role_steps=5", "model.warmup.lora_r=4"]) == names  # no warm-up trains
    shared = ["model.warmup.steps=3", "model.warmup.roles=[grading, rewrite]"]
    assert same(shared, [*shared, "model.warmup.role_steps=5"]) == names  # the roles train with the Base
    separate = [*shared, "model.warmup.role_model=separate"]
    assert same(separate, [*separate, "model.warmup.role_steps=5"]) == names[:names.index("01_base_policy")]
    assert same(shared, separate) == names[:names.index("01_base_policy")]
