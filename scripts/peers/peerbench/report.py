#!/usr/bin/env python3
"""Writes the dsp-vs-DGL section of docs/benchmarks.md from scripts/peers/bench.sh's results.

Usage: report.py RESULTS_DIR BENCHMARKS_MD
The section sits between the peer-bench markers; it replaces an earlier one, or is appended.
Figures are medians over the alternating rounds; every ratio compares runs of one script run.
"""
import glob
import json
import os
import re
import statistics
import sys

BEGIN, END = "<!-- peer-bench:begin -->", "<!-- peer-bench:end -->"


def load(path):
    with open(path) as f:
        return json.load(f)


def load_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def cmd(res, name):
    p = os.path.join(res, name + ".cmd")
    return open(p).read().strip() if os.path.exists(p) else "(not run)"


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def rounds(res, pattern):
    return sorted(glob.glob(os.path.join(res, pattern)))


def sampling(res, md):
    dsp = [load(p) for p in rounds(res, "sample_dsp_r*.json")]
    dgl = [load(p) for p in rounds(res, "sample_dgl_r*.json")]
    if not dsp or not dgl:
        return
    d_eps = med([j["modes"][0]["sampled_edges_per_s"] for j in dsp])
    d_epb = med([j["modes"][0]["sampled_edges_per_batch"] for j in dsp])
    rows = [["dsp (`bench sample`, 1 rank)", f"{d_eps / 1e6:.2f}", f"{d_epb / 1e3:.1f}k", "-"]]
    for name, label in (("dgl_unfused", "DGL default path"), ("dgl_fused", "DGL fused path")):
        eps = med([j[name]["eps_med"] for j in dgl])
        epb = med([j[name]["edges_per_batch"] for j in dgl])
        rows.append([label, f"{eps / 1e6:.2f}", f"{epb / 1e3:.1f}k", f"**{d_eps / eps:.2f}x**"])
    g = dgl[0]
    md.append(f"### Sampling: R-MAT, {g['N']:,} nodes, {g['E']:,} edges without duplicates\n")
    md.append("Uniform node-wise sampling without replacement, fanouts [15,10,5] from 1024 random "
              "seeds per batch, one core. Sampled edges per second (median over the rounds; DGL: "
              "median of its 3 repetitions per round); the two systems must draw about the same "
              "edges per batch.\n")
    md.append(table(["sampler", "M edges/s", "edges/batch", "dsp / this"], rows))
    md.append("")
    bound(res, md, dsp, d_eps, d_epb)


def bound(res, md, dsp, d_eps, d_epb):
    """The physical bound: random reads per sampled edge against the measured memory latency."""
    p = os.path.join(res, "latency.json")
    if not os.path.exists(p):
        return
    lat = load(p)
    j = dsp[0]
    m = j["modes"][0]
    tasks = (m["tasks_local"] + m["tasks_remote"]) / j["batches"]
    # Each task (a frontier node) reads its indptr pair and the first line of its neighbour list
    # at random: two dependent misses at least; its later picks may hit the same lines.
    reads = 2 * tasks / d_epb
    ns = lat["ns_per_load_thp"]
    serial = 1e9 / (reads * ns)
    md.append(f"Physical bound: a batch samples {d_epb / 1e3:.1f}k edges from {tasks / 1e3:.1f}k "
              f"frontier nodes, so at least {reads:.2f} random reads per sampled edge (the node's "
              "indptr pair, then its neighbour list: two dependent misses per node; the relabel "
              "table and the batch's own arrays stay in the caches). A dependent chain of loads "
              "over 1 GiB (scripts/peers/peerbench/pointer_chase.c) takes "
              f"{lat['ns_per_load_4k']:.0f} "
              f"ns per load on 4 KiB pages and {ns:.0f} ns on huge pages: one miss at a time, one "
              f"core would sample at most {serial / 1e6:.1f} M edges/s. dsp runs at "
              f"{d_eps / serial:.1f}x that (its prefetches keep about that many misses in "
              "flight); the rest of the way is memory-level parallelism, which the core's miss "
              "buffers (about 20 lines) cap near "
              f"{20 * serial / 1e6:.0f} M edges/s.\n")


def end_to_end(res, md, meta):
    rows, loss_rows = [], []
    for T in meta["threads"].split():
        dsp = {pipe: [load_jsonl(p) for p in rounds(res, f"train_dsp_{pipe}_t{T}_r*.jsonl")]
               for pipe in ("off", "on")}
        dgl = [load(p) for p in rounds(res, f"train_dgl_t{T}_r*.json")]
        if not dgl or not all(dsp.values()):
            continue
        # Epoch 2 is timed (epoch 1 warms caches and the allocator); epoch 1's loss compares
        # learning per step.
        g_ep = med([j["epochs"][1]["wall_s"] for j in dgl])
        g_st = {k: med([j["epochs"][1][k + "_s_sum"] for j in dgl])
                for k in ("sample", "gather", "train")}
        for pipe, runs in dsp.items():
            d_ep = med([r[1]["epoch_s"] for r in runs])
            d_st = {k: med([r[1]["pipeline"]["stages"][k]["busy_s"] for r in runs])
                    for k in ("sampler", "loader", "trainer")}
            rows.append([T, f"dsp, pipeline {pipe}", f"{d_ep:.1f}", f"{d_st['sampler']:.1f}",
                         f"{d_st['loader']:.1f}", f"{d_st['trainer']:.1f}",
                         f"**{g_ep / d_ep:.2f}x**"])
        rows.append([T, "DGL", f"{g_ep:.1f}", f"{g_st['sample']:.1f}", f"{g_st['gather']:.1f}",
                     f"{g_st['train']:.1f}", "1.00x"])
        loss_rows.append([T] + [" ".join(f"{r[0]['loss']:.3f}" for r in dsp[pipe])
                                for pipe in ("off", "on")] +
                         [" ".join(f"{j['epochs'][0]['mean_loss']:.3f}" for j in dgl)])
        steps = dgl[0]["steps_per_epoch"]
    if not rows:
        return
    subset = (f" (the graph's first {meta['steps']} x 1024 training nodes of a seeded permutation: "
              "epochs of the same steps for both)" if meta.get("steps") else "")
    md.append("### End to end: GraphSAGE on the community graph\n")
    md.append(f"GraphSAGE-mean, 3 layers, hidden 128, fanouts [15,10,5], batch 1024, Adam (lr "
              f"0.01, weight decay 5e-4), dropout 0.5 on the hidden layers; {steps} steps per "
              f"epoch{subset}. dsp: `dsp train` (one rank); DGL: NeighborSampler + DataLoader "
              "+ SAGEConv. Epoch 2's wall time (median over the rounds) and where it went: dsp's "
              "three stages run concurrently with the pipeline on (busy seconds of each worker, "
              "inflated when they share a core), one after another with it off, as DGL's. "
              "Speedup = DGL's epoch time / dsp's. On one core the pipeline's three workers only "
              "take turns, so it costs (thread switches, caches shared) rather than overlaps.\n")
    md.append(table(["threads", "system", "epoch s", "sample s", "load s", "train s",
                     "speedup"], rows))
    md.append("\nLearning per step: mean training loss over epoch 1, one value per round (round r "
              "seeds both systems with r; the two cannot draw the same samples or dropout "
              "masks).\n")
    md.append(table(["threads", "dsp, pipeline off", "dsp, pipeline on", "DGL"], loss_rows))
    md.append("")


def step(res, md):
    p_dsp, p_dgl = os.path.join(res, "step_dsp.json"), os.path.join(res, "step_dgl.json")
    if not (os.path.exists(p_dsp) and os.path.exists(p_dgl)):
        return
    def per_step(path):
        st = load(path)["train_step_rank0"]
        return {k: 1e3 * st[k] / max(1, st["steps"]) for k in st if k.endswith("_s")}

    ms = per_step(p_dsp)
    p_p2 = os.path.join(res, "step_dsp_p2.json")
    ms2 = per_step(p_p2) if os.path.exists(p_p2) else None
    g = load(p_dgl)["stages"]
    g_total = g["forward"]["median"] + g["backward"]["median"] + g["optimizer"]["median"]
    md.append("### The train step, one thread per rank\n")
    md.append("dsp: mean over the steps of `dsp bench pipeline` after its first warm-up epoch "
              "(aggregation = the fused CSR ops inside forward and backward; dense = the rest: "
              "projections, activations, dropout, loss; all-reduce = packing the gradients into "
              "one bucket, plus the MPI all-reduce with 2 ranks); DGL: medians of dgl_train.py "
              "--stages (one process). ms per step.\n")

    def col(key, m=ms):
        return f"{m[key]:.1f}" if m else "-"

    def dense(m):
        return f"{m['forward_s'] - m['aggregation_forward_s']:.1f}" if m else "-"

    def step_total(m):
        return (f"**{m['forward_s'] + m['backward_s'] + m['all_reduce_s'] + m['optimizer_s']:.1f}**"
                if m else "-")

    rows = [
        ["forward", col("forward_s"), col("forward_s", ms2), f"{1e3 * g['forward']['median']:.1f}"],
        ["- aggregation", col("aggregation_forward_s"), col("aggregation_forward_s", ms2), "-"],
        ["- dense", dense(ms), dense(ms2), "-"],
        ["backward", col("backward_s"), col("backward_s", ms2),
         f"{1e3 * g['backward']['median']:.1f}"],
        ["- aggregation", col("aggregation_backward_s"), col("aggregation_backward_s", ms2), "-"],
        ["gradient all-reduce", col("all_reduce_s"), col("all_reduce_s", ms2), "-"],
        ["optimizer", col("optimizer_s"), col("optimizer_s", ms2),
         f"{1e3 * g['optimizer']['median']:.1f}"],
        ["**step**", step_total(ms), step_total(ms2), f"**{1e3 * g_total:.1f}**"],
        ["step, trainer thread CPU time", col("thread_cpu_s"), col("thread_cpu_s", ms2), "-"],
    ]
    md.append(table(["part", "dsp, 1 rank", "dsp, 2 ranks (rank 0)", "DGL"], rows))
    md.append("")


def main():
    res, out_md = sys.argv[1], sys.argv[2]
    meta = load(os.path.join(res, "meta.json"))
    md = [BEGIN, "## dsp vs DGL on one machine (scripts/peers/bench.sh)\n"]
    md.append(f"Machine: {meta['cpu']}, {meta['cores']} cores, {meta['mem_gib']} GiB, shared "
              f"with other work (runs alternate dsp / DGL, {meta['rounds']} rounds, medians). "
              f"Date: {meta['date']}, commit {meta['commit']}, `{meta['size']}` sizes. dsp: "
              f"LibTorch {meta['libtorch']} (Debian); DGL {meta['dgl']} on torch {meta['torch']} "
              "(PyPI). "
              + (f"Each timed phase held `{meta['lock']}` (no concurrent builds)."
                 if meta.get("lock") else
                 "Timed without a build lock: other builds and test runs shared the 2 cores, so "
                 "absolute times (and the memory latency) are inflated; only the ratios of runs "
                 "alternating in one script run carry.") + "\n")
    sampling(res, md)
    end_to_end(res, md, meta)
    step(res, md)
    md.append("Commands (round 0; the others differ in the seed):\n")
    for name in ("sample_dsp_r0", "sample_dgl_r0"):
        md.append("    " + cmd(res, name))
    T0 = meta["threads"].split()[0]
    for name in (f"train_dsp_off_t{T0}_r0", f"train_dsp_on_t{T0}_r0", f"train_dgl_t{T0}_r0", "step_dsp", "step_dsp_p2",
                 "step_dgl"):
        md.append("    " + cmd(res, name))
    md.append("\nRaw JSON and logs: `out/peer/<size>/results/`.")
    md.append(END)
    section = "\n".join(md) + "\n"
    text = open(out_md).read() if os.path.exists(out_md) else "# Benchmarks\n"
    if BEGIN in text and END in text:
        text = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END) + "\n?", lambda _: section, text,
                      flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(out_md, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
