import pytest
import torch


@pytest.fixture(autouse=True)
def single_threaded_torch():
    """Run these tiny models on one thread, as ranks do: on a busy 2-core machine two OpenMP
    threads make one CharTransformer step ~20x slower (7 ms -> 170 ms measured)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
