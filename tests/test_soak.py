"""The soak (evaluator/measuring/soak.py) on the CPU: windows, drift and its note.

In: a callable that slows down steadily. Out: pass/fail."""

import pytest

from evaluator.measuring import soak


@pytest.mark.slow
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


class _FakeGraphs:
    """Stands in for timing.GraphSampler: capture fails while the capture is hidden from
    the model (its eager path syncs, as transformers' GPT-2 did on the H200) and works
    where the model sees it, or never works."""

    def __init__(self, works_when_seen: bool):
        self.works_when_seen, self.tries = works_when_seen, []

    def __call__(self, fns, policy):
        from evaluator.measuring import timing

        self.tries.append(timing._hide_capture)
        if timing._hide_capture or not self.works_when_seen:
            raise RuntimeError("operation not permitted when stream is capturing")
        return self

    def _capture(self, calls):
        return "graph"

    def _replay_ms(self):
        return 1.0


def test_the_soak_captures_the_models_own_path_where_its_eager_path_cannot_be(monkeypatch):
    fake = _FakeGraphs(works_when_seen=True)
    monkeypatch.setattr(soak, "GraphSampler", fake)
    step, note = soak._graph_step(lambda: None)
    assert fake.tries == [True, False] and step() == 1.0  # hidden first, then seen
    assert note == "soaked on the model's own capture path (its eager path did not capture: RuntimeError)"
    from evaluator import report
    from evaluator.measuring import timing

    assert timing._hide_capture  # restored
    zh = report.notes.notes_in_words(note, report.Strings("zh"))
    assert zh == "按模型自己的捕获路径浸泡（其即时执行路径无法捕获：RuntimeError）"


def test_the_soak_is_eager_where_no_capture_works(monkeypatch):
    fake = _FakeGraphs(works_when_seen=False)
    monkeypatch.setattr(soak, "GraphSampler", fake)
    assert soak._graph_step(lambda: None) == (None, "") and fake.tries == [True, False, True]


def test_the_soak_captures_with_host_numbers_filled_on_the_device_as_its_last_try(monkeypatch):
    from evaluator import report
    from evaluator.measuring import timing

    class Copies(_FakeGraphs):
        """Fails wherever the model copies a host number to the device (transformers' eager mask)."""

        def __call__(self, fns, policy):
            self.tries.append(timing._hide_capture)
            if not timing._fill_scalars:
                raise RuntimeError("Cannot copy between CPU and CUDA tensors during CUDA graph capture")
            return self

    fake = Copies(works_when_seen=False)
    monkeypatch.setattr(soak, "GraphSampler", fake)
    step, note = soak._graph_step(lambda: None)
    assert fake.tries == [True, False, True] and step() == 1.0 and not timing._fill_scalars
    assert note.startswith("soaked with the numbers the model copies to the device each call filled there")
    zh = report.notes.notes_in_words(note, report.Strings("zh"))
    assert zh.startswith("浸泡时") and "RuntimeError" in zh
