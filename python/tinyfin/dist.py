"""tinyfin.dist: data-parallel training over Open MPI, libtinyfin-dist from Python
(include/tinyfin/dist.hpp, docs/distributed.md).

    import tinyfin.dist as dist
    dist.init()                                    # from mpirun's / srun's environment
    ddp = dist.DistributedDataParallel(model)      # rank 0's parameters broadcast
    opt = tinyfin.optim.AdamW(ddp.parameters())
    sampler = dist.ShardedSampler(len(data), 64, seed=0)
    for epoch in range(1, epochs + 1):
        sampler.set_epoch(epoch)
        for step in range(sampler.steps()):
            mine = sampler.batch(step)             # numpy int64 indices, may be empty
            opt.zero_grad()
            ddp.set_batch_size(len(mine))
            if len(mine):
                F.cross_entropy(ddp(x[mine]), y[mine]).backward()
            ddp.synchronize_gradients()            # every rank: the same averaged gradients
            opt.step()

Every call here is collective: each rank makes the same calls in the same order. Built when
tinyfin is built with MPI (libopenmpi-dev); importing it otherwise raises ImportError. `import
tinyfin` alone never loads MPI.
"""
import atexit as _atexit
import sys as _sys

from .nn import Module as _Module

try:
    from . import _dist
except ImportError as _e:  # built without MPI
    raise ImportError("tinyfin.dist needs tinyfin built with MPI (Debian libopenmpi-dev; meson "
                      f"-Ddist=enabled): {_e}") from None

DistError = _dist.DistError
MismatchError = _dist.MismatchError
TimeoutError = _dist.TimeoutError


class ReduceOp:
    """Reduction names for all_reduce and reduce_scatter (plain strings work as well)."""
    SUM = "sum"
    MEAN = "mean"
    AVG = "mean"
    MAX = "max"
    MIN = "min"


# The one Context of this process (MPI is initialised once per process).
_state = {"context": None, "finalized": False}


def init(timeout=0.0, check_shapes=True):
    """Initialises MPI from the launcher's environment (mpirun, srun; without one: a world of
    one) and returns the Context; later calls return the same one. timeout: seconds a collective
    may wait for the others before TimeoutError (0: forever; TINYFIN_DIST_TIMEOUT overrides).
    check_shapes: exchange shapes and dtypes before each collective (TINYFIN_DIST_CHECK=0 turns
    it off). MPI is finalised at exit; an uncaught exception aborts every rank instead, so the
    others do not wait for this one forever."""
    if _state["context"] is not None:
        return _state["context"]
    if _state["finalized"]:
        raise DistError("MPI was already finalised in this process (tinyfin.dist.finalize); "
                        "initialise once for the whole program")
    ctx = _dist.Context(float(timeout), bool(check_shapes))
    _state["context"] = ctx
    _atexit.register(finalize)
    _install_excepthook()
    return ctx


def is_initialized():
    return _state["context"] is not None


def finalize():
    """Finalises MPI (also done at exit). Every rank must call it; nothing of tinyfin.dist works
    afterwards."""
    ctx = _state["context"]
    if ctx is None:
        return
    _state["context"] = None
    _state["finalized"] = True
    ctx._finalize()


def _install_excepthook():
    previous = _sys.excepthook

    def hook(kind, value, tb):
        previous(kind, value, tb)
        ctx = _state["context"]
        if ctx is not None and ctx.world_size > 1:
            # MPI_Finalize at exit would wait for ranks that wait for this one.
            ctx.abort(1, f"uncaught {kind.__name__}: {value}")

    _sys.excepthook = hook


def context():
    """The Context of init(); DistError when init() was not called."""
    ctx = _state["context"]
    if ctx is None:
        raise DistError("tinyfin.dist.init() was not called (or finalize() was)")
    return ctx


def rank():
    return context().rank


def world_size():
    return context().world_size


def local_rank():
    """Rank among this machine's processes: pick the GPU with it."""
    return context().local_rank


def local_size():
    return context().local_size


def launcher():
    """"mpirun", "slurm" or "singleton"."""
    return context().launcher


get_rank, get_world_size = rank, world_size


def all_reduce(tensor, op=ReduceOp.SUM):
    """In place: every rank's tensor becomes the reduction of all ranks' ("sum", "mean" (f32),
    "max", "min"). Returns the tensor."""
    context().all_reduce(tensor, op)
    return tensor


def broadcast(tensor, src=0):
    """In place: every rank's tensor becomes rank src's. Returns the tensor."""
    context().broadcast(tensor, src)
    return tensor


def all_gather(tensor):
    """A new tensor: the ranks' tensors concatenated along axis 0 in rank order (rank 0 -> [world])."""
    return context().all_gather(tensor)


def reduce_scatter(tensor, op=ReduceOp.SUM):
    """A new tensor: rank r's piece r of world_size equal pieces (along axis 0) of the reduction."""
    return context().reduce_scatter(tensor, op)


def barrier():
    context().barrier()


def abort(code=1, message="aborted"):
    """Prints message with this rank and stops every rank of the job with exit status code."""
    context().abort(code, message)


def nccl_version():
    """NCCL's version when libtinyfin-dist was built against it (e.g. 22105), else 0. Every
    collective runs on MPI either way (docs/distributed.md, "Mapping to NCCL")."""
    return _dist.nccl_version()


def checksum(tensors):
    """FNV-1a 64 of the tensors' bytes in order, as the examples' "weights checksum"."""
    return _dist.checksum(list(tensors))


class DistributedDataParallel(_Module):
    """Wraps a tinyfin.nn.Module for data-parallel training (the C++ DistributedDataParallel on
    its parameters): rank 0's parameters are broadcast at construction; during backward each
    gradient is copied into its bucket (about bucket_cap_mb MB) as soon as it is final and a full
    bucket starts a nonblocking allreduce; synchronize_gradients() finishes and leaves every rank
    with the weighted average. Parameters are named "module.<name>" as in PyTorch. Move the
    module to its device before wrapping it."""

    def __init__(self, module, bucket_cap_mb=25, broadcast_parameters=True):
        super().__init__()
        if not isinstance(module, _Module):
            raise DistError(f"DistributedDataParallel wraps a tinyfin.nn.Module, got {type(module).__name__}")
        ctx = context()
        self.module = module
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        impl = _dist.DistributedDataParallel(ctx, named, int(bucket_cap_mb * (1 << 20)),
                                             bool(broadcast_parameters))
        object.__setattr__(self, "_impl", impl)

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def set_batch_size(self, local_samples):
        """Samples this rank's loss averages over in the coming backward (0: none this step)."""
        self._impl.set_batch_size(int(local_samples))

    def synchronize_gradients(self):
        """Every rank: waits for the buckets and writes the weighted average into each grad."""
        self._impl.synchronize_gradients()

    def backward(self, loss):
        loss.backward()
        self.synchronize_gradients()

    def no_sync(self):
        """Context manager: backward only accumulates locally inside it (gradient accumulation);
        the first synchronised backward after it averages the accumulated sum."""
        return self._impl._no_sync()

    def bucket_layout(self):
        """Indices into the wrapped module's parameters() of each bucket, in reduction order."""
        return self._impl.bucket_layout()

    @property
    def buckets_started_in_backward(self):
        return self._impl.buckets_started_in_backward

    def extra_repr(self):
        return self._impl.describe()


class ShardedSampler:
    """Each rank's slice of every global batch of a permutation common to all ranks, reshuffled
    per epoch from seed (the C++ ShardedSampler: the same order as the single-process examples).
    Every rank has the same number of steps; a rank's slice may be empty in a short last batch."""

    def __init__(self, dataset_size, global_batch, seed=0, shuffle=True, world_size=None, rank=None):
        if world_size is None or rank is None:
            ctx = context()
            world_size = ctx.world_size if world_size is None else world_size
            rank = ctx.rank if rank is None else rank
        self._impl = _dist.ShardedSampler(int(dataset_size), int(global_batch), int(world_size),
                                          int(rank), int(seed), bool(shuffle))
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch
        self._impl.set_epoch(int(epoch))

    def steps(self):
        return self._impl.steps()

    __len__ = steps

    def batch(self, step):
        """This rank's sample indices of step, a numpy int64 array (may be empty)."""
        return self._impl.batch(int(step))

    def global_batch_size(self, step):
        return self._impl.global_batch_size(int(step))

    def shard_size(self):
        return self._impl.shard_size()

    def __iter__(self):
        return (self.batch(s) for s in range(self.steps()))
