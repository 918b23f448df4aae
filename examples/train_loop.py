#!/usr/bin/env python3
"""A small model trained with EMO's energy optimizer in the loop (docs/python.md, "In the training loop").

    python examples/train_loop.py                      # CPU, an emulated H100 (no GPU needed)
    python examples/train_loop.py --device nvml:auto   # on a GPU: the runtime applies the policy (root or emo clockd)

Needs torch (pip install torch) and the emo package (pip install .).
"""
import argparse

import torch

import emo.torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="emulated:h100", help="emulated:NAME[@SEED], nvml:auto or nvml:N")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--max-slowdown", type=float, default=0.05)
    ap.add_argument("--clockd", default=None, help="the node's emo clockd socket (no root needed)")
    a = ap.parse_args()
    dev = "cuda" if a.device.startswith("nvml") and torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 10)).to(dev)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(128, 512, device=dev), torch.randint(0, 10, (128,), device=dev)
    opt = emo.torch.EnergyOptimizer(max_slowdown=a.max_slowdown, device=a.device, clockd=a.clockd, progress=print)
    for step in range(a.steps):
        opt.on_step_begin()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optim.step()
        optim.zero_grad()
        opt.on_step_end()
        if step % 10 == 0:
            print(f"step {step}: loss {loss.item():.3f}, emo {opt.phase}")
    r = opt.close()
    print(f"emo: {r['phase']}, saved {r['saving_pct']} % at {r['slowdown_pct']} % slowdown (measured); "
          f"bound {100 * r['bound']:.1f} %, re-plans {r['replans']}")


if __name__ == "__main__":
    main()
