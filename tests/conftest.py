"""Shared test fixtures."""
import pytest
import torch


@pytest.fixture(scope="module")
def one_thread():
    """Tiny tensors gain nothing from 2 threads and lose a lot when the cores are shared."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def pytest_configure(config):
    config.addinivalue_line("markers", "studies: the study commands, README's commands and the plain-install "
                                       "pipeline, run as written on tiny configs (make test-studies; make test "
                                       "leaves them out)")
