"""The soak (evaluator/soak.py) on the CPU: windows, drift and its note.

In: a callable that slows down steadily. Out: pass/fail."""

from evaluator import soak


def test_soak_reports_windows_and_drift():
    import time
    calls = []

    def slowing():
        calls.append(1)
        time.sleep(0.001 * (1 + len(calls) / 50))

    s = soak.soak(slowing, "cpu", seconds=1.0, windows=4)
    assert len(s.window_ms) == 4 and 0 < s.iterations < len(calls)  # warm-up calls are not counted
    assert s.drift > 0.05  # a steady slide is visible
    assert any("drifted" in n for n in s.notes)
