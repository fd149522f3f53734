"""The tools: speed benchmarks (``bench``), the GPU and memory checks, the smoke golden comparison, the RL seed
pilot, comparing two runs and exporting a graded policy. They sit above the runner (they may run stages and
read their keys) and below the CLI; no notebook imports them and no stage key covers them
(``edit_lib.fingerprints``)."""
