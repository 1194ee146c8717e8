"""retained_heap: large blocks come from the heap and stay there once freed."""

import json
import subprocess
import sys

import pytest
import torch

from clestim import _heap
from clestim._heap import retained_heap
from clestim.nets.generators import TimeVAE

MIB_64 = 64 << 20


# Each measurement runs in a fresh interpreter: what a heap can serve from its free
# lists depends on everything the process allocated before.
_MEASURE = """
import ctypes, importlib.util, json, sys
import numpy as np

# _heap.py alone, not the package: a bare interpreter, quick to start
spec = importlib.util.spec_from_file_location("heap", sys.argv[1])
heap = importlib.util.module_from_spec(spec)
spec.loader.exec_module(heap)
retained_heap = heap.retained_heap

class Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Mallinfo2

def mmapped_while_holding_64mib():
    before = libc.mallinfo2().hblkhd
    block = np.ones(64 << 20, dtype=np.uint8)
    during = libc.mallinfo2().hblkhd
    del block
    return during - before

out = {"before": mmapped_while_holding_64mib()}
with retained_heap():
    with retained_heap():
        pass
    out["inside"] = mmapped_while_holding_64mib()  # after an inner one has exited
    out["kept"] = libc.mallinfo2().fordblks
out["after"] = mmapped_while_holding_64mib()
out["kept_after"] = libc.mallinfo2().fordblks
print(json.dumps(out))
"""


@pytest.mark.skipif(not hasattr(_heap._glibc(), "mallinfo2"),
                    reason="mallopt and mallinfo2 are glibc's (2.33+)")
def test_large_blocks_come_from_the_heap_inside_and_are_mmapped_outside():
    run = subprocess.run([sys.executable, "-c", _MEASURE, _heap.__file__],
                         capture_output=True, text=True, check=True)
    m = json.loads(run.stdout)
    assert m["before"] >= MIB_64  # glibc maps a block this large...
    assert m["inside"] == 0  # ...but inside, even after a nested one exited, the heap serves it
    assert m["kept"] >= MIB_64  # and keeps it once freed, for the next step
    assert m["after"] >= MIB_64  # leaving the outermost restores glibc's defaults
    assert m["kept_after"] < MIB_64  # and returns the heap's free top to the system


def test_training_inside_gives_the_same_bits():
    """Where memory comes from must not change what is computed: two Adam steps of a
    TimeVAE whose output layer (3072 x 3072, 36 MiB) glibc would otherwise mmap."""

    def train() -> list[torch.Tensor]:
        torch.manual_seed(0)
        vae = TimeVAE(24, 128, hidden=(8, 16))
        optimizer = torch.optim.Adam(vae.parameters())
        x = torch.randn(4, 24, 128)
        for _ in range(2):
            optimizer.zero_grad()
            vae.loss(x).backward()
            optimizer.step()
        return [p.detach().clone() for p in vae.parameters()]

    plain = train()
    with retained_heap():
        retained = train()
    assert all(torch.equal(a, b) for a, b in zip(plain, retained))
