# PyTorch program for the injection probe: a few training steps of a small MLP.
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(128, 256, device="cuda"); y = torch.randint(0, 10, (128,), device="cuda")
losses = []
for _ in range(5):
    opt.zero_grad(); loss = torch.nn.functional.cross_entropy(model(x), y); loss.backward(); opt.step()
    losses.append(loss.item())
print("OK" if losses[-1] < losses[0] else "WRONG", losses)
