"""baton.RNGState and baton.GeneratorState: random number generators, as this rank's per-rank state."""

import random
import sys


class RNGState:
    """This rank's torch, NumPy and Python ``random`` generator states.

    Put one in the state dict (``state["rng"] = baton.RNGState()``): a save
    records the global generators as they are at the call, as this rank's
    per-rank state (JSON, no pickle); a restore sets them back on the same
    rank at the same world size (at another world size the restore leaves
    them as they are and rank 0 warns, naming them; with
    ``drop_rank_state_on_resize=False`` it refuses: baton.ResizeRefused). Covered: ``random`` (Python's global generator), ``numpy.random``'s
    global RandomState, torch's CPU generator and, where CUDA is initialised,
    every CUDA device's generator (untested: no GPU here). A generator
    object of the program's own (a DataLoader's ``generator=``, a
    ``numpy.random.Generator``) is not global: put it in a
    ``baton.GeneratorState``.

    torch and NumPy are recorded only when the program has imported them.
    """

    _baton_per_rank = True

    def state_dict(self):
        version, internal, gauss_next = random.getstate()
        state = {"python": [version, list(internal), gauss_next]}
        np = sys.modules.get("numpy")
        if np is not None:
            kind, key, pos, has_gauss, cached = np.random.get_state(legacy=True)
            state["numpy"] = {"kind": kind, "key": key.astype("<u4").tobytes(), "pos": int(pos),
                              "has_gauss": int(has_gauss), "cached_gaussian": float(cached)}
        torch = sys.modules.get("torch")
        if torch is not None:
            state["torch"] = torch.get_rng_state().numpy().tobytes()
            # is_initialized() first: without a GPU, is_available() asks NVML anew at each call (a dlopen,
            # 0.25 ms of every save and load here); a CUDA torch has initialized is available.
            if torch.cuda.is_initialized() and torch.cuda.is_available():
                state["cuda"] = [s.numpy().tobytes() for s in torch.cuda.get_rng_state_all()]
        return state

    def load_state_dict(self, state):
        version, internal, gauss_next = state["python"]
        random.setstate((version, tuple(internal), gauss_next))
        if "numpy" in state:
            import numpy as np
            s = state["numpy"]
            key = np.frombuffer(s["key"], dtype="<u4").astype(np.uint32)
            np.random.set_state((s["kind"], key, s["pos"], s["has_gauss"], s["cached_gaussian"]))
        if "torch" in state:
            import torch
            torch.set_rng_state(torch.frombuffer(bytearray(state["torch"]), dtype=torch.uint8))
            if "cuda" in state:
                torch.cuda.set_rng_state_all(
                    [torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in state["cuda"]])

    def __repr__(self):
        return "baton.RNGState()"


class GeneratorState:
    """One generator object of the program's own, as this rank's per-rank state.

    ``baton.GeneratorState(gen)``: ``gen`` is a ``torch.Generator`` (a
    DataLoader's ``generator=``, a sampler's; its ``get_state()`` bytes are
    kept) or a NumPy ``numpy.random.Generator`` (its bit generator's state,
    a dict of ints). Put it in the state dict (``state["loader_rng"] =
    baton.GeneratorState(loader.generator)``): a save records the
    generator's state as it is at the call, a restore sets it back on the
    same rank at the same world size (JSON, no pickle), as RNGState does for
    the global generators. A generator's state differs between ranks, so it
    is never a replicated tensor.
    """

    _baton_per_rank = True
    __slots__ = ("generator",)

    def __init__(self, generator):
        torch = sys.modules.get("torch")
        np = sys.modules.get("numpy")
        if not ((torch is not None and isinstance(generator, torch.Generator)) or
                (np is not None and isinstance(generator, np.random.Generator))):
            raise TypeError(f"baton.GeneratorState: a {type(generator).__module__}.{type(generator).__qualname__} "
                            "is neither a torch.Generator nor a numpy.random.Generator")
        self.generator = generator

    def state_dict(self):
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(self.generator, torch.Generator):
            return {"torch_generator": self.generator.get_state().numpy().tobytes()}
        return {"numpy_generator": self.generator.bit_generator.state}

    def load_state_dict(self, state):
        if "torch_generator" in state:
            import torch
            self.generator.set_state(torch.frombuffer(bytearray(state["torch_generator"]), dtype=torch.uint8))
        else:
            self.generator.bit_generator.state = state["numpy_generator"]

    def __repr__(self):
        return f"baton.GeneratorState({self.generator!r})"
