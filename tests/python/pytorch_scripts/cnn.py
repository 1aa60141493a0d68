"""A PyTorch training script, run unmodified but for its imports by test_pytorch_scripts.py:
a small CNN with BatchNorm, a DataLoader, Adam and a StepLR schedule, then evaluation.
argv: the data file (.npz: images x [N, 1, 8, 8], labels y, and p0, p1, ... the initial
parameters in model.parameters() order)."""
import json
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class SmallCNN(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 4, kernel_size=3, padding=1),
            nn.BatchNorm2d(4),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(4, 6, kernel_size=(3, 2), padding="same"),
            nn.BatchNorm2d(6),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = nn.Linear(6, classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


data = np.load(sys.argv[1])
dataset = TensorDataset(torch.from_numpy(data["x"]), torch.from_numpy(data["y"]))
loader = DataLoader(dataset, batch_size=8, shuffle=False)

model = SmallCNN()
with torch.no_grad():
    for i, p in enumerate(model.parameters()):
        p.copy_(torch.from_numpy(data[f"p{i}"]))

optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
criterion = nn.CrossEntropyLoss()
losses, lrs = [], []
for epoch in range(4):
    model.train()
    for images, labels in loader:
        optimizer.zero_grad()
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    lrs.append(optimizer.param_groups[0]["lr"])
    scheduler.step()

model.eval()
with torch.no_grad():
    eval_loss = criterion(model(dataset.tensors[0]), dataset.tensors[1]).item()
state = {k: v.detach().numpy().tolist() for k, v in model.state_dict().items()}
print(json.dumps({"losses": losses, "lrs": lrs, "eval_loss": eval_loss, "state": state}))
