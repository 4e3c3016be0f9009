"""Routing a model's own calls to TileLang kernels, at the operator the profiler saw.

`router` (the TorchFunctionMode that sends the chosen families' torch calls to tuned
kernels and counts every call: ran in TileLang, or fell back and why) and `written`
(norms and rotary embeddings a model writes out as several calls, found by what they
compute and seen by the router as one call).
"""
