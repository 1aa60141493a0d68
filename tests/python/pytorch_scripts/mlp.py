"""A PyTorch training script, run unmodified but for its imports by test_pytorch_scripts.py:
a two-layer MLP classifier, SGD with momentum and weight decay, mini-batches by slicing.
argv: the data file (.npz: x, y and the initial weights w1, b1, w2, b2)."""
import json
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, n_in, n_hidden, n_out):
        super().__init__()
        self.fc1 = nn.Linear(n_in, n_hidden)
        self.fc2 = nn.Linear(n_hidden, n_out)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


data = np.load(sys.argv[1])
x = torch.from_numpy(data["x"])
y = torch.from_numpy(data["y"])

torch.manual_seed(0)
model = MLP(8, 16, 3)
with torch.no_grad():
    for p, name in zip(model.parameters(), ["w1", "b1", "w2", "b2"]):
        p.copy_(torch.from_numpy(data[name]))

optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
losses = []
for step in range(20):
    start = (step * 16) % x.shape[0]
    xb, yb = x[start:start + 16], y[start:start + 16]
    optimizer.zero_grad()
    loss = F.cross_entropy(model(xb), yb)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())

model.eval()
with torch.no_grad():
    accuracy = (model(x).argmax(dim=1) == y).float().mean().item()
print(json.dumps({"losses": losses, "accuracy": accuracy,
                  "params": [p.detach().numpy().tolist() for p in model.parameters()]}))
