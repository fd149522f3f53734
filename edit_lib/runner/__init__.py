"""The runner layer: the stage context a notebook opens, the papermill runner, stage keys, the preflight and dry
run, the provider registrations, benchmarks, the golden-number check and the multi-process launcher. It records
and schedules results but computes none of them, so no stage key covers it (``edit_lib.fingerprints``)."""
