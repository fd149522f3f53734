"""The optional vLLM backend (model.generation_backend: vllm) without vLLM: a stand-in `vllm` module records what
the suite asks of it, so the wiring (sampling settings, rows, adapters as LoRA requests, the merged RL
initialisation, GRPO's co-located engine, the errors where vLLM cannot run) is tested on a CPU. vLLM itself is
exercised only on a GPU machine with it installed."""
from __future__ import annotations

import dataclasses
import sys
import types
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from edit_lib.model import vllm_engine
from edit_lib.config import ConfigError, load_profile
from edit_lib.model.generate import COLUMNS, SamplingConfig, _prompt_seed, generate_vllm, policy_generate
from edit_lib.model.policy import Policy, load_policy, load_policy_from_profile


class _Tok:
    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [1] + [len(w) for w in text.split()]}


class FakeLLM:
    instances: list = []

    def __init__(self, **kw):
        self.kw, self.calls = kw, []
        FakeLLM.instances.append(self)

    def get_tokenizer(self):
        return _Tok()

    def generate(self, prompts, params, use_tqdm=True, lora_request=None):
        self.calls.append(dict(prompts=prompts, params=params, lora_request=lora_request))
        outs = []
        for i, _ in enumerate(prompts):
            comps = [SimpleNamespace(text=f"p{i} r{r} Final mark: 1", token_ids=list(range(3 + r)),
                                     finish_reason="stop" if r % 2 == 0 else "length") for r in range(params[i].n)]
            outs.append(SimpleNamespace(outputs=comps))
        return outs


@dataclasses.dataclass
class FakeParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int = 16
    seed: int | None = None
    repetition_penalty: float = 1.0


@dataclasses.dataclass
class FakeLoRARequest:
    lora_name: str
    lora_int_id: int
    lora_path: str


@pytest.fixture()
def fake_vllm(monkeypatch):
    FakeLLM.instances = []
    vllm = types.ModuleType("vllm")
    vllm.LLM, vllm.SamplingParams = FakeLLM, FakeParams
    lora, request = types.ModuleType("vllm.lora"), types.ModuleType("vllm.lora.request")
    request.LoRARequest = FakeLoRARequest
    for name, mod in {"vllm": vllm, "vllm.lora": lora, "vllm.lora.request": request}.items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(vllm_engine, "_ENGINES", {})
    monkeypatch.setattr(vllm_engine, "_LORA_IDS", {})
    return vllm


def test_sampled_rows_match_the_hf_layout(fake_vllm):
    llm = FakeLLM()
    cfg = SamplingConfig(n=3, temperature=0.9, top_p=0.8, top_k=5, max_new_tokens=40, seed=7)
    df = generate_vllm(llm, ["a bb", "ccc"], cfg, ids=["r1", "r2"], parse=lambda t, i: {"who": f"{i}:{t[:2]}"},
                       progress=False)
    assert list(df.columns)[:len(COLUMNS)] == COLUMNS and "who" in df.columns
    assert len(df) == 6 and df["rollout_id"].tolist() == [0, 1, 2, 0, 1, 2]
    assert df["response_id"].tolist() == ["r1"] * 3 + ["r2"] * 3
    assert df["n_prompt_tokens"].tolist() == [3] * 3 + [2] * 3  # counted with the engine's tokenizer, specials in
    assert df["n_tokens"].tolist() == [3, 4, 5] * 2 and df["finished"].tolist() == [True, False, True] * 2
    p0, p1 = llm.calls[0]["params"]  # one SamplingParams per prompt
    assert (p0.n, p0.temperature, p0.top_p, p0.top_k, p0.max_tokens) == (3, 0.9, 0.8, 5, 40)
    assert p0.seed != p1.seed and p0.seed == _prompt_seed(7, 0)
    assert llm.calls[0]["prompts"] == [{"prompt_token_ids": [1, 1, 2]}, {"prompt_token_ids": [1, 3]}]


def test_greedy_is_one_draw_at_temperature_zero_replicated_n_times(fake_vllm):
    llm = FakeLLM()
    df = generate_vllm(llm, ["x"], SamplingConfig(greedy=True, n=2, max_new_tokens=9), progress=False)
    p = llm.calls[0]["params"][0]
    assert (p.n, p.temperature, p.top_k) == (1, 0.0, -1)
    assert df["text"].tolist() == ["p0 r0 Final mark: 1"] * 2 and df["rollout_id"].tolist() == [0, 1]
    assert generate_vllm(llm, [], SamplingConfig(), progress=False).empty
    with pytest.raises(ValueError, match="2 ids for 1 prompts"):
        generate_vllm(llm, ["x"], SamplingConfig(), ids=[1, 2])


def test_policy_generate_uses_the_engine_when_the_policy_has_one():
    seen = {}

    class Engine:
        def generate(self, prompts, cfg, ids=None, progress=True, parse=None):
            seen.update(prompts=list(prompts), n=cfg.n)
            return pd.DataFrame({"text": ["e"]})

    pol = Policy(model=None, tokenizer=None, kind="tiny", engine=Engine())
    assert policy_generate(pol, ["q"], SamplingConfig(n=4))["text"].tolist() == ["e"]
    assert seen == {"prompts": ["q"], "n": 4}


def _vllm_profile(*extra):
    return load_profile("smoke", ["model.name_or_path=embedded", "model.generation_backend=vllm", *extra])


def test_profiles_reject_an_unknown_backend():
    with pytest.raises(ConfigError, match="generation_backend must be one of \\('hf', 'vllm'\\)"):
        load_profile("smoke", ["model.generation_backend=tgi"])


def test_vllm_without_the_package_or_a_gpu_is_a_clear_error(fake_vllm, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(vllm_engine.VLLMUnavailable, match="no CUDA device"):
        load_policy_from_profile(_vllm_profile())
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm now raises ImportError
    with pytest.raises(vllm_engine.VLLMUnavailable, match="vllm is not installed"):
        vllm_engine.check_available()


def test_policies_map_onto_engines_and_lora_requests(fake_vllm, monkeypatch, tmp_path):
    monkeypatch.setattr(vllm_engine, "check_available", lambda: None)  # as on a GPU machine with vLLM
    monkeypatch.setenv("EDIT_SUITE_CACHE", str(tmp_path / "cache"))
    prof = _vllm_profile("model.vllm_gpu_memory_utilization=0.4")
    # an adapter folder on the embedded grader (the SFT recipe's LoRA, untrained: its weights do not matter here)
    from edit_lib.model.hf import attach_lora
    model, tok, _ = load_policy("embedded", prof.model)
    adapter = tmp_path / "edit_sft"
    attach_lora(model, dataclasses.replace(prof.sft.lora, r=4, alpha=8)).save_pretrained(adapter)

    base = load_policy_from_profile(prof)
    assert base.engine.lora_request is None and base.engine.gpu_memory_utilization == 0.4
    llm = FakeLLM.instances[0]
    assert llm.kw["enable_lora"] and llm.kw["max_lora_rank"] == prof.sft.lora.r
    assert llm.kw["gpu_memory_utilization"] == 0.4 and llm.kw["model"].endswith("grader")

    sft = load_policy_from_profile(prof, adapter=adapter)
    assert sft.engine.llm is llm  # the same Base engine, the adapter per request
    assert sft.engine.lora_request == FakeLoRARequest("edit_sft", 1, str(adapter.resolve()))
    policy_generate(sft, ["q"], SamplingConfig(n=2), progress=False)
    assert llm.calls[-1]["lora_request"].lora_path == str(adapter.resolve())

    rl = load_policy_from_profile(prof, adapter=adapter, init_adapter=adapter)  # RL adapter over merged SFT
    merged = rl.engine.llm.kw["model"]
    assert rl.engine.llm is not llm and str(tmp_path / "cache" / "vllm_merged") in merged
    assert rl.engine.lora_request.lora_int_id == 1  # the same adapter folder keeps its id
    again = load_policy_from_profile(prof, init_adapter=adapter)
    assert again.engine.llm is rl.engine.llm and len(FakeLLM.instances) == 2  # merged once, one engine


def test_grpo_rollouts_are_co_located_with_vllm():
    from edit_lib.train.rl import build_grpo_config
    prof = load_profile("paper")
    args = build_grpo_config(prof.rl, prof.sft.lora, "/tmp/rlcal/unused", "sas_history", 42, use_cpu=False,
                             vllm_gpu_memory_utilization=0.3)
    assert args.use_vllm and args.vllm_mode == "colocate" and args.vllm_gpu_memory_utilization == 0.3
    plain = build_grpo_config(prof.rl, prof.sft.lora, "/tmp/rlcal/unused", "sas_history", 42, use_cpu=True)
    assert not plain.use_vllm
    with pytest.raises(ValueError, match="vLLM generation needs a GPU"):
        build_grpo_config(prof.rl, prof.sft.lora, "/tmp/u", "sas_history", 42, use_cpu=True,
                          vllm_gpu_memory_utilization=0.3)
    with pytest.raises(ValueError, match=r"must lie in \(0, 1\)"):
        build_grpo_config(prof.rl, prof.sft.lora, "/tmp/u", "sas_history", 42, use_cpu=False,
                          vllm_gpu_memory_utilization=1.5)


def test_a_run_asking_for_vllm_on_a_cpu_stops_before_any_notebook(tmp_path, monkeypatch):
    from edit_lib.runner.run import run
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ConfigError, match="vllm is not installed"):
        run("smoke", overrides=["model.generation_backend=vllm"], run_root=str(tmp_path))
    assert not any(tmp_path.rglob("*.ipynb"))
