"""The device a run measures on and the accelerators it is judged for.

`hardware` (which device, its identity and published peaks, the TileLang target and the
threads timing runs on) and `targets` (the accelerators' limits that kernels are lowered
against, for portability and search spaces).
"""
