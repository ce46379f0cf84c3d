"""capcore.stopwatch: phases add up, and the line it prints parses back to the same seconds."""
from capcore import stopwatch
from capcore.stopwatch import Stopwatch, parse_line


def test_phases_sum_and_the_line_round_trips(monkeypatch):
    clock = iter([0.0, 2.5, 10.0, 10.25, 20.0, 21.0])  # enter/exit pairs: 2.5 s, 0.25 s, 1.0 s
    monkeypatch.setattr(stopwatch.time, "perf_counter", lambda: next(clock))
    watch = Stopwatch("stage1 demo_pose")
    with watch.phase("row L(Log-ratio)+M(Dense)"):
        pass
    with watch.phase("evaluation"):
        pass
    with watch.phase("row L(Log-ratio)+M(Dense)"):  # entered again: adds to the same phase
        pass
    assert watch.phases == {"row L(Log-ratio)+M(Dense)": 3.5, "evaluation": 0.25}
    assert watch.line() == "timing stage1 demo_pose: row L(Log-ratio)+M(Dense) 3.5 s, evaluation 0.2 s"
    assert parse_line(watch.line()) == ("stage1 demo_pose", {"row L(Log-ratio)+M(Dense)": 3.5, "evaluation": 0.2})


def test_a_phase_that_raises_is_still_timed(monkeypatch):
    clock = iter([1.0, 4.0])
    monkeypatch.setattr(stopwatch.time, "perf_counter", lambda: next(clock))
    watch = Stopwatch("x")
    try:
        with watch.phase("train"):
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert watch.phases == {"train": 3.0}


def test_other_lines_are_not_timing_lines():
    for line in ("", "timing", "timing x: steps", "timing x: steps 1.0 min", "epoch 3: val CIDEr-D 0.8 s",
                 "timing x: a 1.0 s, b", "  BLEU-4   0.2460"):
        assert parse_line(line) is None, line
