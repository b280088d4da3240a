"""Optimizer references: torch.optim.AdamW (fused), on the shared BERT fixture with transformers'
linear schedule as run_mlm trains, and alone on a few tensors with a skipped step.

  adamw DIR OUT           3 training steps of DIR's model on REF's batch with torch.optim.AdamW
                          (fused=True; no decay for biases and LayerNorm weights, as run_mlm), clipping at 1.0
                          and get_linear_schedule_with_warmup(2 warmup, 10 total), dropout off;
                          writes the labels used and the final parameters to OUT.
  fused-adamw OUT         20 steps of torch.optim.AdamW(fused=True) on a few named tensors (no
                          decay for biases and LayerNorm weights) with seeded gradients and a
                          linear schedule; step 7 is skipped (as GradScaler skips a non-finite
                          one); OUT holds the initial tensors, every gradient, the learning
                          rates and the final tensors.
"""
import json
import os

import torch


def adamw(model_dir, out_path):
    from safetensors.torch import load_file, save_file
    from transformers import BertForMaskedLM, get_linear_schedule_with_warmup

    ref = load_file(os.path.join(model_dir, "reference.safetensors"))
    model = BertForMaskedLM.from_pretrained(model_dir).eval()  # eval: no dropout
    ids, types, mask = ref["input_ids"], ref["token_type_ids"], ref["attention_mask"]
    labels = torch.full_like(ids, -100)
    pick = (mask == 1) & (torch.arange(ids.shape[1]) % 3 == 1)
    labels[pick] = ids[pick]
    no_decay = ["bias", "LayerNorm.weight"]
    named = list(model.named_parameters())
    groups = [
        {"params": [p for n, p in named if not any(nd in n for nd in no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in named if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, fused=True)
    sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=2, num_training_steps=10)
    lrs, norms, losses = [], [], []
    for _ in range(3):
        opt.zero_grad()
        loss = model(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels).loss
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item())
        lrs.append(opt.param_groups[0]["lr"])
        losses.append(loss.item())
        opt.step()
        sched.step()
    tensors = {n: p.detach().contiguous() for n, p in named}
    tensors["labels"] = labels
    save_file(tensors, out_path)
    print(json.dumps({"lrs": lrs, "grad_norms": norms, "losses": losses}))


def fused_adamw(out_path):
    from safetensors.torch import save_file

    torch.manual_seed(0)
    shapes = {"l.weight": (7, 5), "l.bias": (7,), "LayerNorm.weight": (5,), "LayerNorm.bias": (5,), "e.weight": (11, 5)}
    params = {n: torch.nn.Parameter(torch.randn(s)) for n, s in shapes.items()}
    tensors = {f"init.{n}": p.detach().clone() for n, p in params.items()}
    no_decay = [p for n, p in params.items() if n.endswith(".bias") or "LayerNorm." in n]
    decay = [p for n, p in params.items() if not (n.endswith(".bias") or "LayerNorm." in n)]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, fused=True)
    steps, warmup, skipped = 20, 5, 7
    lrs = [1e-3 * (k + 1) / warmup if k < warmup else 1e-3 * (steps - k) / (steps - warmup) for k in range(steps)]
    for k in range(steps):
        for n, p in params.items():
            p.grad = torch.randn(p.shape) * (0.1 + 0.05 * k)
            tensors[f"grad.{k}.{n}"] = p.grad.clone()
        if k == skipped:
            continue  # the update whose gradients were not finite: nothing moves, nothing counts
        for g in opt.param_groups:
            g["lr"] = lrs[k]
        opt.step()
    for n, p in params.items():
        tensors[f"final.{n}"] = p.detach().clone()
    tensors["lrs"] = torch.tensor(lrs, dtype=torch.float64)
    save_file(tensors, out_path)
    print(json.dumps({"steps": steps, "skipped": skipped}))
