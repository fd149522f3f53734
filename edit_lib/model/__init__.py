"""The policy (grader): named and local Base models, loading, generation (HF or vLLM), rollouts and greedy
grading, the format warm-up Base and vocabulary coverage (Sec. 2.1, App. B)."""
