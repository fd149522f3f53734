"""The runner layer: the stage context a notebook opens, the papermill runner, stage keys, the preflight and dry
run (with its time estimate), the provider registrations and the multi-process launcher. It records and
schedules results but computes none of them, so no stage key covers it (``edit_lib.fingerprints``). The tools
that measure, check or compare runs live one room up, in ``edit_lib.tools``."""
