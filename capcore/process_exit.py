"""How a capaware command's process ends once it has been a rank of a torchrun job: without the
interpreter's teardown.

Why (issue #45): gloo's worker threads drop their last collective a moment after that collective
returns, and dropping it frees tensors that have Python objects, which needs the GIL. A rank with nothing
left to do reaches interpreter finalization within milliseconds; under load the worker thread may not
have run yet. It then asks the finalizing interpreter for the GIL, is told to exit, and the C++ runtime
aborts the whole process ("terminate called without an active exception", SIGABRT), which makes
torchrun stop the other ranks. A core dump of such a rank showed exactly this (a
``ProcessGroupGloo::runLoop`` thread in ``~AsyncBarrierWork`` -> ``THPVariable_clear`` -> ``take_gil`` ->
``pthread_exit``, the main thread in ``Py_FinalizeEx``). ``destroy_process_group`` does not join those
threads in torch 2.14, so no clean-up order avoids the window; ending the process after the atexit
handlers and a flush, without finalization, does. torch.distributed itself considered registering a
teardown at exit for the same crash (pytorch/pytorch pull request 179291, not merged).

Torch-free, so that ``capcore.errors`` (imported by every CLI, config loading included) stays light.
"""
from __future__ import annotations

import atexit
import os
import sys

_skip_teardown = False


def skip_teardown() -> None:
    """Called once this process joins a process group (capcore.distributed.init)."""
    global _skip_teardown
    _skip_teardown = True


def teardown_skipped() -> bool:
    return _skip_teardown


def finish(code: int) -> None:
    """End the process now with ``code`` if it joined a process group; otherwise return and let it end
    normally. Everything a normal exit would do that capaware relies on runs first: the atexit handlers
    (TensorBoard writers, logging) and a flush of stdout and stderr."""
    if not _skip_teardown:
        return
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: nothing more can be said on it
            pass
    os._exit(code)
