"""The report's sections, one module per area of the page.

Every builder has the same shape: `(result, t, f) -> value`, where `result` is a
`RunResult` whose fields may be None or empty (a run that stopped early, a stage not
run, a baseline written before a field existed), `t` the `Strings` and `f` the `Fmt` of
one language. The value is what the template lays out, already formatted: a dict, a list
of rows, or None where the section has nothing to show (the template then says "not
measured"). Builders read the result only; they write nothing and fetch nothing.

  page_one.py     the manager's page: verdict, summary, failed items, what would change
                  the verdict, next steps, the five key-number cards
  evidence.py     the checklist table, each item's evidence rebuilt from the run
  kernels.py      hot operators, correctness, per-op speed, roofline, tuning appendix
  e2e.py          the end-to-end run (views, calls and fallbacks, output check), the soak
  portability.py  the kernel x accelerator matrix (lowered, not run) and its page-one line
  upstream.py     upstream TileLang's health and the fork's drift
  comparison.py   against the previous baseline, and the trend across baselines
  environment.py  software, hardware, model and settings; stage problems; timing policy
"""
