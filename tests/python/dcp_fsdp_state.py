"""The FSDP2 training state the DCP resharding and continuation tests share.

A small MLP under fully_shard (gloo on CPU) with AdamW, plus DTensors laid
out as tensor parallelism would (Shard(1), Replicate()); seeded, so every
launch builds the same model and the same batches.
"""
import torch
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

WIDTH = 240  # divisible by 2, 3 and 4: even shards at every world size tested; large enough that
# the bytes a resharding rank reads are mostly its shards (not the fixed small entries)


def mesh_of(shape):
    """A CPU mesh: (n,) 1-D, or (replicate, shard) 2-D for HSDP."""
    names = ("shard",) if len(shape) == 1 else ("replicate", "shard")
    return init_device_mesh("cpu", tuple(shape), mesh_dim_names=names)


def build(mesh):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(), torch.nn.Linear(WIDTH, 6))
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-2)
    return model, optim


def extras(mesh):
    """DTensors beside the model: dim 1 split over the shard dim, and one replicated everywhere."""
    g = torch.Generator().manual_seed(7)
    a = torch.randn(5, 4 * WIDTH, generator=g)
    b = torch.randn(3, 3, generator=g)
    shard = [Shard(1)] if mesh.ndim == 1 else [Replicate(), Shard(1)]
    rep = [Replicate()] * mesh.ndim
    return {"col": distribute_tensor(a, mesh, shard), "rep": distribute_tensor(b, mesh, rep)}


def batch(step):
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(12, WIDTH, generator=g), torch.randn(12, 6, generator=g)


def train(model, optim, steps, first=0):
    for step in range(first, first + steps):
        x, y = batch(step)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optim.step()
        optim.zero_grad(set_to_none=True)


def state(model, optim, mesh):
    msd, osd = get_state_dict(model, optim)
    return {"model": msd, "optim": osd, "extra": extras(mesh)}


def put(model, optim, sd):
    set_state_dict(model, optim, model_state_dict=sd["model"], optim_state_dict=sd["optim"])


class Training:
    """Model and optimizer as one object with state_dict()/load_state_dict() through DCP's helpers
    (get_state_dict/set_state_dict: FQN keys, the optimizer's state made before its first step), as
    baton.Checkpointer's state takes it."""

    def __init__(self, model, optim):
        self.model, self.optim = model, optim

    def state_dict(self):
        msd, osd = get_state_dict(self.model, self.optim)
        return {"model": msd, "optim": osd}

    def load_state_dict(self, sd):
        set_state_dict(self.model, self.optim, model_state_dict=sd["model"], optim_state_dict=sd["optim"])


def full(sd, prefix=""):
    """Every tensor of a state dict as a full (gathered) tensor, by path. Collective (DTensors)."""
    out = {}
    for k, v in sd.items():
        path = prefix + str(k)
        if isinstance(v, dict):
            out.update(full(v, path + "."))
        elif isinstance(v, DTensor):
            out[path] = v.full_tensor()
        elif isinstance(v, torch.Tensor):
            out[path] = v.clone()
    return out
