"""evaluator: decide, with evidence, whether a PyTorch model should move onto TileLang.

In: a model spec and settings (see `evaluator.config`). Out: a run folder with a
versioned baseline and a go/no-go report. `evaluator.pipeline.run` orders the stages.
"""

__version__ = "0.1.0"
