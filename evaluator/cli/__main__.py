"""`python -m evaluator.cli`: the same as the `evaluate` script."""

from . import main

if __name__ == "__main__":
    main()
