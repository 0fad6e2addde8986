"""Collectives made outside jax.jit wait for the jitted ones dispatched
before them (ddp.jax): JAX runs jitted work asynchronously, so without this a
rank could make its direct comm.allreduce before a jitted allreduce it
called first, while a peer makes them in order, and two same-shaped calls
would pair with each other. ddp.jax's calls carry a side effect, so
jax.effects_barrier() waits for them; finalize and free wait too, so that no
jitted collective outlives its communicator. Nothing here loads JAX: it acts
only once ddp.jax is imported."""
import sys
import threading

_inside_handler = threading.local()  # set while an XLA handler makes its call


def wait_for_jitted_collectives():
    if "ddp.jax" not in sys.modules or getattr(_inside_handler, "active", False):
        return
    import jax  # loaded: ddp.jax is
    jax.effects_barrier()


class InsideHandler:
    """`with InsideHandler():` around an XLA handler's own collective (which
    runs inside the computation that a barrier would wait for)."""

    def __enter__(self):
        _inside_handler.active = True

    def __exit__(self, *exc):
        _inside_handler.active = False
