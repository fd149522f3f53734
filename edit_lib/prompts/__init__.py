"""Prompts and their parsers: grading and the probe scaffold (``grading``), the checklist and rewrite prompts
(``rewrite``, with the locator hints in ``rewrite_hints``) and InT's intervention prompt (``intervention``)."""
