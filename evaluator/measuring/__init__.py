"""Measuring: the one home of timing and of judging outputs.

`timing` (the device timer: CUDA-graph replay, interleaved rounds, bootstrap intervals),
`bench` (an operator against PyTorch, and the model end to end, with the guards),
`soak` (latency over minutes), `compiled` (torch.compile as a third side),
`compile_path` (which program a model runs when it believes it is compiled), `outputs`
(a model's outputs against the reference: tolerances, NaN and Inf, signal) and `checks`
(one kernel's output and a tuning candidate judged), `ceilings` (the device's measured
roof).
"""
