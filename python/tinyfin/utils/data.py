"""tinyfin.utils.data: Dataset, TensorDataset and a single-process DataLoader with PyTorch's
batch_size, shuffle, drop_last and collate_fn. Shuffling is seeded (seed=, else the next draw of
tinyfin.manual_seed's stream at each epoch), so a run is reproducible on every backend."""
import numpy as _np

import tinyfin as _tf

__all__ = ["Dataset", "TensorDataset", "DataLoader", "default_collate"]


class Dataset:
    """An indexable collection: subclasses define __getitem__ and __len__."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__}.__getitem__ is not defined")

    def __len__(self):
        raise NotImplementedError(f"{type(self).__name__}.__len__ is not defined")


class TensorDataset(Dataset):
    """Samples are the i-th rows of each tensor (all of one length along dim 0)."""

    def __init__(self, *tensors):
        if not tensors:
            raise _tf.ValueError("TensorDataset: pass at least one tensor")
        n = tensors[0].shape[0]
        for t in tensors:
            if t.shape[0] != n:
                raise _tf.ShapeError(f"TensorDataset: tensors of lengths {n} and {t.shape[0]} along dim 0")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


def default_collate(batch):
    """Stacks samples: tensors along a new dim 0, numbers into a tensor, tuples/lists and dicts
    element by element."""
    first = batch[0]
    if isinstance(first, _tf.Tensor):
        return _tf.stack(list(batch))
    if isinstance(first, (int, float)) and not isinstance(first, bool):
        return _tf.tensor(list(batch))
    if isinstance(first, _np.ndarray):
        return _tf.tensor(_np.stack(batch))
    if isinstance(first, dict):
        return {k: default_collate([b[k] for b in batch]) for k in first}
    if isinstance(first, (tuple, list)):
        return type(first)(default_collate(list(items)) for items in zip(*batch))
    return list(batch)


class DataLoader:
    """Batches of a Dataset in order, or shuffled (a new permutation each epoch). The last
    partial batch is kept unless drop_last. num_workers other than 0 is refused (single process)."""

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, collate_fn=None, seed=None,
                 num_workers=0, **ignored):
        if batch_size is None or int(batch_size) < 1:
            raise _tf.ValueError(f"DataLoader: batch_size must be >= 1, got {batch_size}")
        if num_workers:
            raise _tf.ValueError("DataLoader: worker processes are not supported; use num_workers=0")
        self.dataset, self.batch_size = dataset, int(batch_size)
        self.shuffle, self.drop_last = shuffle, drop_last
        self.collate_fn = collate_fn or default_collate
        self.seed, self._epoch = seed, 0

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _order(self):
        n = len(self.dataset)
        if not self.shuffle:
            return list(range(n))
        seed = _tf._next_seed() if self.seed is None else _tf._C.mix_seed(int(self.seed), self._epoch)
        self._epoch += 1
        return _np.random.default_rng(seed).permutation(n).tolist()

    def __iter__(self):
        order = self._order()
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            if len(idx) < self.batch_size and self.drop_last:
                return
            yield self.collate_fn([self.dataset[i] for i in idx])
