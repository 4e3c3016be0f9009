"""Profiling: where a model's time goes, by operator family and shape.

`profile` (torch.profiler over a few forward passes: each aten call attributed to the
outermost operator a family knows, shapes named by the families, fused patterns found,
times that add up to the whole) and `stage` (the profile stage: which families to
rewrite, and what the terminal is told).
"""
