"""``edit-suite export`` (edit_lib/tools/export.py): what it refuses, the model card, and the round
trip: the smoke run's EDIT-SFT+EDIT-RL policy, exported with and without --merge, loaded in a fresh process by
transformers / peft alone and prompted and parsed by the suite's own functions, grades as 07 graded."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import edit_lib.tools.export as export_mod
from edit_lib.artifacts import RunPaths, recorded_stage_dir, write_json
from edit_lib.cli import main
from edit_lib.config import load_profile
from edit_lib.tools.export import ExportError, export, locate
from edit_lib.runner.keys import hashed_params, weights_fingerprint

ROOT = Path(__file__).resolve().parents[2]
HUB = ["model.name_or_path=Qwen/Qwen3-8B", "model.hub_commit=0123abcd"]


def _adapter(folder: Path) -> str:
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps(dict(r=8, lora_alpha=16, lora_dropout=0.05,
                                                                target_modules=["q_proj"],
                                                                base_model_name_or_path="/somewhere/else")))
    return str(folder)


def _fake_run(root: Path, overrides=HUB) -> RunPaths:
    """Results JSON files (05, 06, 07) and adapter folders as a finished run of the smoke profile on a hub Base
    leaves them; no weights (the tests here stop before any is loaded)."""
    prof = load_profile("smoke", overrides)
    paths = RunPaths.for_profile(prof.name, root)
    sft = _adapter(paths.stage_dir("05_edit_sft", "k05") / "adapters" / "edit_sft" / "synth_sas")
    rl = _adapter(paths.stage_dir("06_rl", "k06") / "runs" / "edit_sft_edit_rl" / "synth_sas" / "seed0")
    write_json(paths.results_file("05_edit_sft"), dict(key="k05", artifact_key="k05", git_commit="c05",
                                                       params=dict(sft=dict(epochs=1, lora=dict(r=8))),
                                                       extra=dict(adapters={"edit_sft": {"synth_sas": sft}})))
    write_json(paths.results_file("06_rl"), dict(
        key="k06", artifact_key="k06", git_commit="c06", params=dict(rl=dict(steps=2, beta_kl=0.02)),
        extra=dict(rl_adapters={"edit_sft_edit_rl": {"synth_sas": {"0": dict(adapter=rl, init_adapter=sft)}}},
                   shaping={"edit_sft/synth_sas": [0.75, 0.1]}),
        tables=dict(rl_plan=[dict(system="edit_sft_edit_rl", dataset="synth_sas", seed=0, init="edit_sft",
                                  arm="edit_rl", trainer="grpo")])))
    graded = [dict(system="base", dataset="synth_sas", seed=None, adapter=None, init_adapter=None),
              dict(system="edit_sft", dataset="synth_sas", seed=None, adapter=sft, init_adapter=None),
              dict(system="edit_sft_edit_rl", dataset="synth_sas", seed=0, adapter=rl, init_adapter=sft)]
    metrics = [dict(system="edit_sft_edit_rl", dataset="synth_sas", seed=0.0, split="ood_test", subject="all",
                    n=12, qwk=0.4218, acc=0.25, within1=0.75, mae=2.6667, n_invalid=0)]
    write_json(paths.results_file("07_evaluation"), dict(
        key="k07", artifact_key="k07", git_commit="c07", run_date="2026-11-28T06:08:31Z",
        params=dict(model=hashed_params(prof, ("model",))["model"], eval=dict(max_new_tokens=200)),
        inputs=dict(weights=weights_fingerprint(prof.model.name_or_path, prof.model.hub_commit)),
        extra=dict(graded=graded), tables=dict(metrics=metrics)))
    return paths


def _message(**kw) -> str:
    with pytest.raises(ExportError) as e:
        locate("smoke", run_root=kw.pop("root"), overrides=HUB, **kw)
    return str(e.value)


def test_export_refuses_with_the_reason(tmp_path):
    paths = _fake_run(tmp_path)
    msg = _message(root=tmp_path, system="edit_rl", dataset="synth_sas")
    assert "unknown system 'edit_rl'" in msg and "base, edit_sft, edit_sft_edit_rl" in msg
    msg = _message(root=tmp_path, system="base_grpo", dataset="synth_sas")
    assert "no policy of system 'base_grpo'" in msg
    msg = _message(root=tmp_path, system="edit_sft_edit_rl", dataset="synth_bio")
    assert "not trained on dataset 'synth_bio'" in msg and "synth_sas" in msg
    msg = _message(root=tmp_path, system="edit_sft_edit_rl", dataset="synth_sas", seed=7)
    assert "no seed 7" in msg and "[0]" in msg
    with pytest.raises(ExportError, match="model.dtype"):  # the run's model values, not the profile's
        locate("smoke", "edit_sft_edit_rl", "synth_sas", run_root=tmp_path, overrides=HUB + ["model.dtype=bfloat16"])
    with pytest.raises(ExportError, match="07 graded Base weights"):
        locate("smoke", "edit_sft_edit_rl", "synth_sas", run_root=tmp_path, overrides=HUB[:1] + ["model.hub_commit=ff"])
    res = json.loads(paths.results_file("06_rl").read_text())  # 06 re-ran after 07: 07's policy is not 06's now
    res["extra"]["rl_adapters"]["edit_sft_edit_rl"]["synth_sas"]["0"]["adapter"] = _adapter(tmp_path / "other")
    write_json(paths.results_file("06_rl"), res)
    assert "re-run 07_evaluation" in _message(root=tmp_path, system="edit_sft_edit_rl", dataset="synth_sas")
    paths.results_file("06_rl").unlink()
    msg = _message(root=tmp_path, system="edit_sft_edit_rl", dataset="synth_sas")
    assert "06_rl" in msg and "RL adapters" in msg
    assert "edit_sft" in locate("smoke", "edit_sft", "synth_sas", run_root=tmp_path, overrides=HUB).system.name
    paths.results_file("05_edit_sft").unlink()
    assert "05_edit_sft" in _message(root=tmp_path, system="edit_sft", dataset="synth_sas")
    with pytest.raises(ExportError, match="no run at"):
        locate("smoke", "base", "synth_sas", run_root=tmp_path / "nothing", overrides=HUB)


def test_the_card_names_the_hub_base_its_commit_the_stack_and_the_metrics(tmp_path, monkeypatch):
    _fake_run(tmp_path)
    monkeypatch.setattr(export_mod, "prompt_style", lambda ex: "chat")  # the hub tokenizer is not downloaded here
    ex = locate("smoke", "edit_sft_edit_rl", "synth_sas", run_root=tmp_path, overrides=HUB)
    out = export(ex, tmp_path / "out")
    card = (out / "README.md").read_text()
    meta = card.split("---")[1]
    assert 'base_model: "Qwen/Qwen3-8B"' in meta and 'library_name: "peft"' in meta
    assert 'base_model_relation: "adapter"' in meta and '"synth_sas"' in meta and "license:" in meta
    assert "0123abcd" in card and "hub:Qwen/Qwen3-8B@0123abcd" in card
    assert "| ood_test | 12 | 0.4218 | 0.2500 |" in card  # 07's metrics row
    assert "09_significance has not run" in card
    assert "`rl.beta_kl`: 0.02" in card and "shaping (beta_drift, gamma) used: [0.75, 0.1]" in card
    assert "r=8, alpha=16" in card and "c07" in card
    assert "Evidence-Diagnosed Intervention Training for Rule-Faithful LLM Grading" in card and "Yulan He" in card
    assert not (out / "base").exists()  # a hub Base is named, not copied
    manifest = json.loads((out / "edit_export.json").read_text())
    assert [a["path"] for a in manifest["adapters"]] == ["adapters/1_sft", "adapters/2_rl"]
    assert [a["merge"] for a in manifest["adapters"]] == [True, False]
    assert (manifest["base"]["hub"], manifest["base"]["hub_commit"]) == ("Qwen/Qwen3-8B", "0123abcd")
    cfg = json.loads((out / "adapters" / "2_rl" / "adapter_config.json").read_text())
    assert (cfg["base_model_name_or_path"], cfg["revision"]) == ("Qwen/Qwen3-8B", "0123abcd")
    with pytest.raises(ExportError, match="not empty"):
        export(ex, out)
    (out / "stale.txt").write_text("x")
    export(ex, out, force=True)
    assert not (out / "stale.txt").exists() and (out / "README.md").exists()


def test_cli_export_exits_2_with_the_reason(tmp_path, capsys):
    _fake_run(tmp_path)
    rc = main(["export", "--profile", "smoke", *sum((["-p", o] for o in HUB), []), "--run-root", str(tmp_path),
               "--system", "int_sft", "--dataset", "synth_sas", "--out", str(tmp_path / "o")])
    assert rc == 2 and "no policy of system 'int_sft'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- the round trip on the smoke run

FRESH = r'''
import json, sys
import torch
export_dir, data_dir, ids, out = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
sys.path.insert(0, export_dir)
import load as exported  # the export's own load.py: transformers (+ peft) only
from edit_lib.data.jsonl import load_dataset
from edit_lib.prompts.grading import read_final_mark, render_grading_prompt
model, tok, m = exported.load(export_dir)
ds = load_dataset(f"{data_dir}/questions.jsonl", f"{data_dir}/responses.jsonl", name=m["dataset"])
rs = [{r.id: r for r in ds.responses}[i] for i in ids]
prompts = [render_grading_prompt(ds.question(r), r.answer, style=m["prompt_style"]) for r in rs]
texts = exported.grade(model, tok, m, prompts)
enc = tok(exported.input_text(tok, m, prompts[0]), add_special_tokens=True, return_tensors="pt")["input_ids"]
with torch.inference_mode():
    torch.save(model(enc).logits[0].float(), out + ".pt")
json.dump(dict(marks=[read_final_mark(t, ds.question(r).max_mark).mark for t, r in zip(texts, rs)], texts=texts,
               modules=sorted(x for x in sys.modules if x.startswith("edit_lib"))), open(out, "w"))
'''
LOGIT_TOL = 1e-4  # measured: 0.0 unmerged, 1.4e-5 merged (float32, CPU); a dropped RL adapter moves 2e-3


def _moves_the_model(adapter: str) -> bool:
    """Whether a LoRA adapter changes its base at all: some ``lora_B`` is nonzero (PEFT starts B at zero, and an SFT
    run of one step spends it in the learning-rate warm-up at rate 0, so its adapter is the identity)."""
    from safetensors.torch import load_file
    return any(v.abs().max().item() > 0 for k, v in load_file(str(Path(adapter) / "adapter_model.safetensors")).items()
               if "lora_B" in k)


def _rl_with_sft_init(paths: RunPaths) -> tuple[str, str, int, dict]:
    """An RL run of the smoke run that starts from an SFT adapter, preferring one whose SFT adapter moves the model
    (only then is "RL over Base" a wrong stack that the logits can tell apart)."""
    rl = json.loads(paths.results_file("06_rl").read_text())["extra"]["rl_adapters"]
    found = [(system, ds, int(seed), a) for system in ("edit_sft_edit_rl", "edit_sft_grpo", "int_sft_int_rl")
             for ds, seeds in sorted(rl.get(system, {}).items()) for seed, a in sorted(seeds.items())
             if a.get("init_adapter")]
    if not found:
        pytest.fail("the smoke run trained no RL system from an SFT start (06's rl_adapters)")
    return next((f for f in found if _moves_the_model(f[3]["init_adapter"])), found[0])


def _suite_logits(prof, graded: dict, ds, response_id: str):
    """The suite's own reading (07's loading path) of the first graded prompt's logits."""
    import torch
    from edit_lib.model.policy import load_policy_from_profile
    pol = load_policy_from_profile(prof, adapter=graded.get("adapter"), init_adapter=graded.get("init_adapter"))
    r = next(x for x in ds.responses if x.id == response_id)
    enc = pol.tokenizer(pol.grading_input(ds.question(r), r.answer), add_special_tokens=True,
                        return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        return pol.model(enc).logits[0].float()


@pytest.mark.slow
@pytest.mark.parametrize("merge", [False, True], ids=["adapters", "merged"])
def test_the_exported_smoke_policy_grades_as_07_did(smoke_run, tmp_path, merge):
    import torch
    from edit_lib.data.registry import load_built
    root, _ = smoke_run
    paths = RunPaths(root)
    system, dataset, seed, a = _rl_with_sft_init(paths)
    out = tmp_path / "export"
    rc = main(["export", "--profile", "smoke", "--run-root", str(root.parent), "--system", system, "--dataset",
               dataset, "--seed", str(seed), "--out", str(out)] + (["--merge"] if merge else []))
    assert rc == 0
    preds = pd.read_parquet(recorded_stage_dir(paths, "07_evaluation") / "predictions.parquet")
    preds = preds[(preds["system"] == system) & (preds["dataset"] == dataset) & (preds["seed"] == seed)]
    preds = preds.sort_values("response_id").head(6)  # a handful of 07's graded responses
    assert len(preds) > 0
    data_dir = recorded_stage_dir(paths, "00_data") / dataset
    result = tmp_path / "fresh.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", FRESH, str(out), str(data_dir),
                           json.dumps(preds["response_id"].tolist()), str(result)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(result.read_text())
    assert got["marks"] == [None if pd.isna(x) else int(x) for x in preds["mark"]]  # 07's greedy marks, exactly
    heavy = [x for x in got["modules"] if x.startswith(("edit_lib.model", "edit_lib.train", "edit_lib.runner",
                                                         "edit_lib.evaluation", "edit_lib.embedded"))]
    assert heavy == [], heavy  # prompts and parser only: no suite model code in the fresh process
    # the smoke's short training barely moves greedy text, so the logits say that the stack is 07's: the export
    # is within LOGIT_TOL of 07's policy and a wrong stack (SFT start alone, or RL over Base) is not
    prof = load_profile("smoke")
    ds = load_built(recorded_stage_dir(paths, "00_data"), [dataset])[dataset]
    first = preds["response_id"].iloc[0]
    want = _suite_logits(prof, a, ds, first)
    exported = torch.load(str(result) + ".pt")
    assert (exported - want).abs().max().item() <= LOGIT_TOL
    assert (_suite_logits(prof, dict(adapter=a["init_adapter"]), ds, first) - want).abs().max().item() > 10 * LOGIT_TOL
    over_base = (_suite_logits(prof, dict(adapter=a["adapter"]), ds, first) - want).abs().max().item()
    if _moves_the_model(a["init_adapter"]):
        assert over_base > 10 * LOGIT_TOL  # the RL adapter over plain Base is another model
    else:  # every SFT start of this run is the identity (one step, spent in warm-up): RL over Base is the stack
        assert over_base <= LOGIT_TOL
