"""tinyfin.optim.lr_scheduler: PyTorch's schedulers, each computing a group's learning rate from
its initial one and the step count in closed form (PyTorch's chainable forms give the same values
up to rounding). Construction applies step 0, as in PyTorch; call step() after optimizer.step()."""
import bisect
import math

import tinyfin as _tf

__all__ = ["LRScheduler", "LambdaLR", "StepLR", "LinearLR", "CosineAnnealingLR", "OneCycleLR",
           "SequentialLR"]


class LRScheduler:
    def __init__(self, optimizer, last_epoch=-1):
        self.optimizer = optimizer
        for g in optimizer.param_groups:
            if last_epoch == -1:
                g.setdefault("initial_lr", g["lr"])
            elif "initial_lr" not in g:
                raise KeyError("initial_lr is not set in a param_group: resuming with last_epoch needs "
                               "an optimizer that was scheduled before")
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._last_lr = [g["lr"] for g in optimizer.param_groups]
        self.step()

    def _lr_at(self, base_lr, epoch, group_index):
        raise NotImplementedError

    def get_last_lr(self):
        return list(self._last_lr)

    def step(self, epoch=None):
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        for k, g in enumerate(self.optimizer.param_groups):
            g["lr"] = self._lr_at(self.base_lrs[k], self.last_epoch, k)
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k != "optimizer" and not callable(v)}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


class LambdaLR(LRScheduler):
    """lr = initial_lr * lr_lambda(epoch) (one function, or one per group)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * n
        if len(self.lr_lambdas) != n:
            raise _tf.ValueError(f"LambdaLR: {len(self.lr_lambdas)} functions for {n} parameter groups")
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, base_lr, epoch, k):
        return base_lr * self.lr_lambdas[k](epoch)

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}


class StepLR(LRScheduler):
    """lr = initial_lr * gamma ** (epoch // step_size)."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size, self.gamma = int(step_size), gamma
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, base_lr, epoch, k):
        return base_lr * self.gamma ** (epoch // self.step_size)


class LinearLR(LRScheduler):
    """lr = initial_lr * factor, factor going linearly from start_factor to end_factor over
    total_iters steps (a warmup), then end_factor."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise _tf.ValueError("LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1]")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, base_lr, epoch, k):
        t = min(self.total_iters, epoch)
        return base_lr * (self.start_factor + (self.end_factor - self.start_factor) * t / self.total_iters)


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (initial_lr - eta_min) (1 + cos(pi epoch / T_max)) / 2."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, base_lr, epoch, k):
        return self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * epoch / self.T_max)) / 2


class OneCycleLR(LRScheduler):
    """The 1cycle policy: lr from max_lr / div_factor up to max_lr over pct_start of the steps,
    then down to initial_lr / final_div_factor ("cos" or "linear" annealing; three_phase as
    PyTorch); with cycle_momentum, momentum (or Adam's beta1) moves the opposite way between
    max_momentum and base_momentum."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95,
                 div_factor=25.0, final_div_factor=1e4, three_phase=False, last_epoch=-1):
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise _tf.ValueError("OneCycleLR: pass total_steps, or epochs and steps_per_epoch")
            total_steps = epochs * steps_per_epoch
        if total_steps <= 0:
            raise _tf.ValueError(f"OneCycleLR: total_steps must be positive, got {total_steps}")
        if anneal_strategy not in ("cos", "linear"):
            raise _tf.ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        self.total_steps = total_steps
        self.anneal_strategy = anneal_strategy
        groups = optimizer.param_groups
        max_lrs = list(max_lr) if isinstance(max_lr, (list, tuple)) else [max_lr] * len(groups)
        if last_epoch == -1:
            for g, m in zip(groups, max_lrs):
                g["initial_lr"] = m / div_factor
                g["max_lr"] = m
                g["min_lr"] = g["initial_lr"] / final_div_factor
        if three_phase:
            self._phases = [(float(pct_start * total_steps) - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                            (float(2 * pct_start * total_steps) - 2, "max_lr", "initial_lr", "base_momentum",
                             "max_momentum"),
                            (total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum")]
        else:
            self._phases = [(float(pct_start * total_steps) - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                            (total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum")]
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if not all("momentum" in g or "betas" in g for g in groups):
                raise _tf.ValueError("OneCycleLR: optimizer must support momentum or beta1 with `cycle_momentum` "
                                     "option enabled")
            if last_epoch == -1:
                for g in groups:
                    g["max_momentum"], g["base_momentum"] = max_momentum, base_momentum
                    if "betas" in g:
                        g["betas"] = (max_momentum, *g["betas"][1:])
                    else:
                        g["momentum"] = max_momentum
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def step(self, epoch=None):
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        step = self.last_epoch
        if step > self.total_steps:
            raise _tf.ValueError(f"OneCycleLR: tried to step {step} times, more than total_steps "
                                 f"({self.total_steps})")
        for g in self.optimizer.param_groups:
            start_step = 0
            for i, (end_step, lr_from, lr_to, m_from, m_to) in enumerate(self._phases):
                if step <= end_step or i == len(self._phases) - 1:
                    pct = (step - start_step) / (end_step - start_step)
                    g["lr"] = self._anneal(g[lr_from], g[lr_to], pct)
                    if self.cycle_momentum:
                        m = self._anneal(g[m_from], g[m_to], pct)
                        if "betas" in g:
                            g["betas"] = (m, *g["betas"][1:])
                        else:
                            g["momentum"] = m
                    break
                start_step = end_step
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]


class SequentialLR(LRScheduler):
    """Runs schedulers one after the other, switching at the milestones (a warmup then a decay:
    SequentialLR(opt, [LinearLR(...), CosineAnnealingLR(...)], milestones=[warmup]))."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(milestones) != len(schedulers) - 1:
            raise _tf.ValueError(f"SequentialLR: {len(schedulers)} schedulers need {len(schedulers) - 1} "
                                 f"milestones, got {len(milestones)}")
        for s in schedulers:
            if s.optimizer is not optimizer:
                raise _tf.ValueError("SequentialLR: every scheduler must belong to the same optimizer")
        self.optimizer = optimizer
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        for g in optimizer.param_groups:
            g["lr"] = g["initial_lr"]
        for s in self._schedulers:
            s.last_epoch -= 1
        self._schedulers[0].step()
        self._last_lr = self._schedulers[0].get_last_lr()

    def step(self, epoch=None):
        self.last_epoch += 1
        idx = bisect.bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler.step(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        for s, sd in zip(self._schedulers, state.pop("_schedulers")):
            s.load_state_dict(sd)
        self.__dict__.update(state)
