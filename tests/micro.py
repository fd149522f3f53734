"""The micro grader as the training and signal tests load it: one thread, never from a hub (tests/conftest.py's
cache builds it once per machine; edit_lib/embedded/build.py)."""
from edit_lib.config import ModelConfig
from edit_lib.model.policy import Policy, load_policy

MICRO = ModelConfig(name_or_path="micro", torch_threads=1, local_files_only=True)


def micro_policy() -> Policy:
    """A fresh micro grader (weights as built, no adapter) wrapped as a Policy."""
    model, tok, kind = load_policy("micro", MICRO)
    return Policy(model=model, tokenizer=tok, kind=kind, name="micro")
