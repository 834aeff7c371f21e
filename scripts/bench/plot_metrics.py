#!/usr/bin/env python3
"""Loss and accuracy curves of a training run.

Usage: plot_metrics.py METRICS.jsonl OUT.png [--title TEXT]

METRICS.jsonl is what `dsp train --metrics FILE` writes: one JSON record per epoch with "epoch",
"loss", "train_acc" and, on evaluated epochs only, "val_acc" and "test_acc". A resumed run appends
to the file, so an epoch may appear twice; the last record of an epoch wins (it is the one the
resumed run produced).
"""
import argparse
import json
import sys

try:
    import matplotlib
except ImportError:
    sys.exit("plot_metrics.py needs matplotlib: pip install matplotlib, or on Debian "
             "apt install python3-matplotlib")

matplotlib.use("Agg")  # works without a display (CI, ssh)
import matplotlib.pyplot as plt  # noqa: E402


def read_records(path):
    by_epoch = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{n}: not a JSON record ({e.msg})")
            if "epoch" not in rec:
                sys.exit(f"{path}:{n}: record without 'epoch'")
            by_epoch[rec["epoch"]] = rec
    if not by_epoch:
        sys.exit(f"{path}: no records")
    return [by_epoch[e] for e in sorted(by_epoch)]


def series(recs, key):
    pts = [(r["epoch"], r[key]) for r in recs if r.get(key) is not None and r[key] >= 0]
    return [p[0] for p in pts], [p[1] for p in pts]


def main():
    ap = argparse.ArgumentParser(description="Plot loss and accuracy from dsp train --metrics")
    ap.add_argument("metrics")
    ap.add_argument("out")
    ap.add_argument("--title", default=None)
    a = ap.parse_args()
    recs = read_records(a.metrics)
    fig, (ax_l, ax_a) = plt.subplots(1, 2, figsize=(9, 3.4))
    x, y = series(recs, "loss")
    ax_l.plot(x, y, marker=".", color="C3")
    ax_l.set_xlabel("epoch")
    ax_l.set_ylabel("training loss")
    ax_l.set_title("loss")
    for key, label in [("train_acc", "train"), ("val_acc", "validation"), ("test_acc", "test")]:
        x, y = series(recs, key)
        if x:
            ax_a.plot(x, y, marker=".", label=label)
    ax_a.set_xlabel("epoch")
    ax_a.set_ylabel("accuracy")
    ax_a.set_title("accuracy")
    ax_a.legend(fontsize=8)
    for ax in (ax_l, ax_a):
        ax.grid(alpha=0.3)
    fig.suptitle(a.title or a.metrics, fontsize=9)
    fig.savefig(a.out, dpi=100, bbox_inches="tight")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
