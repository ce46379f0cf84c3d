"""What TensorBoard shows of a run folder, for resume and schedule tests."""
from pathlib import Path


def tb_values(tb_dir, tag: str) -> dict[int, float]:
    """{step: value} of ``tag`` as TensorBoard shows it: files in the order they were written, and a
    writer's purge_step (a SessionLog START) dropping what an earlier file logged at or after it.
    TensorBoard orders files by name (a timestamp in seconds); a test's launches share a second, so
    order by the first event's wall time instead. A step logged twice without a purge fails."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    files = sorted((next(iter(EventFileLoader(str(f)).Load())).wall_time, str(f)) for f in Path(tb_dir).iterdir())
    values: dict[int, float] = {}
    for _, f in files:
        for event in EventFileLoader(f).Load():
            if event.HasField("session_log") and event.session_log.status == event.session_log.START:
                values = {s: v for s, v in values.items() if s < event.step}
            for v in event.summary.value:
                if v.tag == tag:
                    assert event.step not in values, (tag, event.step)
                    values[event.step] = float(v.tensor.float_val[0]) if v.HasField("tensor") else v.simple_value
    return values


def tb_steps(tb_dir, tag: str) -> list[int]:
    return sorted(tb_values(tb_dir, tag))
