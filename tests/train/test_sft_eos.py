"""InT-SFT targets train without a final EOS, EDIT-SFT's with it (edit_lib/train/sft.py, sft_runs.py; Sec. 3
Baselines (4)): checked on the labels TRL's collator builds, and on the flag 05's runs pass per system."""
from pathlib import Path

import pytest
import torch

from edit_lib.config import LoraConfig, SFTConfig, load_profile
from edit_lib.train import sft_runs
from edit_lib.train.sft import make_trainer
from micro import micro_policy  # the shared micro grader (tests/micro.py)

torch.set_num_threads(1)
CFG = SFTConfig(lora=LoraConfig(r=2, alpha=4), effective_batch_size=2, per_device_batch_size=2)


def _pairs(pol):
    # a short and a long target, so the collator pads the short one
    return [(pol.input_text("Grade this answer."), "step 1: the answer names the cell wall"),
            (pol.input_text("Grade that answer."), "step 1: it names the nucleus\nstep 2: and the membrane too")]


def _last_labels(trainer):
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(len(trainer.train_dataset))])
    return [[t for t in row.tolist() if t != -100][-1] for row in batch["labels"]]


@pytest.mark.parametrize("eos", [True, False])
def test_collator_labels_end_with_eos_only_for_edit_pairs(tmp_path, eos):
    pol = micro_policy()
    tok = pol.tokenizer
    pairs = _pairs(pol)
    tr = make_trainer(pol, pairs, CFG, tmp_path, use_cpu=True, progress=False, eos=eos)
    last = _last_labels(tr)
    want_last = [tok(c, add_special_tokens=False)["input_ids"][-1] for _, c in pairs]
    if eos:  # EDIT: TRL's EOS closes every target
        assert last == [tok.eos_token_id] * len(pairs)
    else:  # InT: the target ends on its own last token; EOS carries no label and is not in the input
        assert tok.eos_token_id not in last and last == want_last
        for row, (p, c) in zip(tr.train_dataset, pairs):
            assert row["input_ids"][-1] != tok.eos_token_id and len(row["input_ids"]) == len(row["labels"])


def test_05_runs_train_int_pairs_without_eos(tmp_path, monkeypatch):
    seen = {}

    def fake_train(policy, pairs, cfg, out, eos=True, **kw):
        seen[Path(out).parent.name] = eos
        raise StopIteration  # stop before any file is read

    monkeypatch.setattr(sft_runs, "train_sft", fake_train)
    monkeypatch.setattr(sft_runs, "load_policy_from_profile", lambda profile: None)
    prof = load_profile("smoke")
    for system in ("edit_sft", "int_sft"):
        with pytest.raises(StopIteration):
            sft_runs.train_all({(system, "d"): [("p", "c")]}, prof, tmp_path, progress=False)
    assert seen == {"edit_sft": True, "int_sft": False}
