"""Accuracy parity of dsp and DGL 2.1 (issue 40): test accuracy at the best validation epoch.

For every dataset, model and seed, trains the same model twice on the same dsp dataset directory
(indptr.npy/indices.npy in-neighbour CSR, features.npy, labels.npy, {train,valid,test}_idx.npy):
  dsp  `dsp train DATASET --model M --fanouts F --batch-size B ... --metrics --result` (subprocess);
  dgl  the standard DGL loop, in process: NeighborSampler (fanouts reversed: input layer first) +
       DataLoader(shuffle=True, drop_last=False), Adam(lr, weight_decay), cross entropy; after
       every epoch FULL-neighbour layer-wise inference (MultiLayerFullNeighborSampler(1), one batch
       of all nodes per layer, eval mode) scores valid and test.
Both report the test accuracy of the epoch with the best validation accuracy (the first best).
Models as dsp's src/train/model.hpp: sage = SAGEConv('mean'), gcn = GraphConv(norm='both') on the
graph with self loops, gat = GATConv (feat_drop = attn_drop = dropout, slope 0.2; hidden layers
concatenate --heads heads of --hidden each, ELU; the output layer averages --out-heads heads).
ReLU + dropout on sage/gcn hidden activations only. Weights start as dsp's (--dgl-init dsp:
LibTorch Linear's init for sage and gcn, DGL's own for gat; --dgl-init dgl: DGL's xavier for all);
biases zero (DGL 2.1's SAGEConv would keep nn.Linear's random fc_self bias).
dsp evaluates as its --eval says (default auto: full neighbourhoods where they fit); pass
--dsp-args "--eval full" to evaluate both sides the same way.

Run with the DGL venv's python (docs: /work/shared/peerbench/README.md), e.g.
  python scripts/peers/parity.py /tmp/cora --models sage,gcn,gat --seeds 0,1,2,3,4 --epochs 100 \
      --dsp-args "--eval full" --out cora.json --markdown cora.md
Prints one line per finished run to stderr; writes every run (curves, seconds) to --out and a
summary table (mean, sample std, min, max and per-seed test accuracy) to --markdown.
"""
import argparse, json, os, shlex, statistics, subprocess, sys, tempfile, time, warnings

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("datasets", nargs="+", metavar="DATASET", help="dsp dataset directory")
ap.add_argument("--dsp", default="/work/main/build/tools/dsp", help="the dsp binary")
ap.add_argument("--models", default="sage,gcn,gat")
ap.add_argument("--seeds", default="0,1,2,3,4")
ap.add_argument("--fanouts", default="10,10", help="dsp's order: from the seeds out")
ap.add_argument("--batch", type=int, default=32)
ap.add_argument("--hidden", type=int, default=64, help="hidden width (GAT: per head)")
ap.add_argument("--heads", type=int, default=8, help="GAT heads of the hidden layers")
ap.add_argument("--out-heads", type=int, default=1, help="GAT heads of the output layer")
ap.add_argument("--lr", type=float, default=0.01)
ap.add_argument("--wd", type=float, default=5e-4)
ap.add_argument("--dropout", type=float, default=0.5)
ap.add_argument("--epochs", type=int, default=100)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--systems", default="dsp,dgl")
ap.add_argument("--dsp-args", default="", help="extra flags for dsp train, verbatim")
ap.add_argument("--dgl-normalize", choices=["none", "row"], default="none",
                help="row: divide each feature row by its sum (clamped at 1) as PyG's "
                     "NormalizeFeatures; pair with --dsp-args '--normalize-features row'")
ap.add_argument("--dgl-self-loops", choices=["graph", "block"], default="graph",
                help="gcn/gat: graph = dgl.add_self_loop before sampling (DGL's examples: the "
                     "loop is sampled like any neighbour); block = sample the loop-free graph and "
                     "add one loop per destination to every block (dsp's definition)")
ap.add_argument("--dgl-init", choices=["dsp", "dgl"], default="dsp",
                help="sage/gcn weights: dsp = LibTorch Linear's init, as dsp's layers "
                     "(uniform, bound 1/sqrt(fan_in)); dgl = DGL's own xavier")
ap.add_argument("--out", help="JSON file of every run")
ap.add_argument("--markdown", help="markdown summary table")
args = ap.parse_args()
T = args.threads
models = args.models.split(",")
seeds = [int(s) for s in args.seeds.split(",")]
fanouts = [int(f) for f in args.fanouts.split(",")]
systems = args.systems.split(",")
DSP_ARG = args.dsp  # as given; the runs use a private copy (private_dsp)
if not (set(models) <= {"sage", "gcn", "gat"} and set(systems) <= {"dsp", "dgl"}):
    ap.error("--models: sage, gcn, gat; --systems: dsp, dgl")
os.environ["OMP_NUM_THREADS"] = str(T)  # before torch is imported
os.environ["DGLBACKEND"] = "pytorch"
warnings.filterwarnings("ignore", message=".*CPU affinity.*")  # DGL's hint, once per loader
_dsp_norm = " ".join(shlex.split(args.dsp_args)).replace("=", " ")
if "dgl" in systems and ("--normalize-features row" in _dsp_norm) != (args.dgl_normalize == "row"):
    print("parity: warning: --dsp-args and --dgl-normalize disagree on feature normalisation",
          file=sys.stderr)


def run_dsp(data, model, seed):
    with tempfile.TemporaryDirectory(prefix="parity-") as tmp:
        m, r = f"{tmp}/metrics.jsonl", f"{tmp}/result.json"
        cmd = [args.dsp, "train", data, "--model", model, "--fanouts", args.fanouts,
               "--batch-size", str(args.batch), "--hidden", str(args.hidden),
               "--heads", str(args.heads), "--lr", str(args.lr), "--weight-decay", str(args.wd),
               "--dropout", str(args.dropout), "--epochs", str(args.epochs), "--seed", str(seed),
               "--threads", str(T), "--no-progress", "--metrics", m, "--result", r]
        if args.out_heads != 1:  # out_heads has no flag, only a config key
            with open(f"{tmp}/config.json", "w") as f:
                json.dump({"out_heads": args.out_heads}, f)
            cmd += ["--config", f"{tmp}/config.json"]
        cmd += shlex.split(args.dsp_args)
        p = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True,
                           env=dict(os.environ, OMP_NUM_THREADS=str(T)))
        if p.returncode != 0:
            sys.exit(f"parity: dsp failed ({p.returncode}): {shlex.join(cmd)}\n{p.stderr[-3000:]}")
        with open(m) as f:
            recs = [json.loads(line) for line in f if line.strip()]
        with open(r) as f:
            res = json.load(f)
    return {"test_at_best": res["test_acc_at_best"], "best_val": res["best_val_acc"],
            "best_epoch": res["best_epoch"], "val_curve": [e.get("val_acc") for e in recs],
            "test_curve": [e.get("test_acc") for e in recs],
            "loss_curve": [e["loss"] for e in recs], "eval": res.get("eval"),
            "test_acc_full": res.get("test_acc_full"),  # sampled eval: the best model's, full
            "command": shlex.join([DSP_ARG] + cmd[1:])}


_graphs = {}  # dataset dir -> (graph, features, labels, splits)


def load_dgl(data):
    if data not in _graphs:
        import numpy as np, torch, dgl
        ld = lambda n: torch.from_numpy(np.load(f"{data}/{n}.npy").astype(np.int64))
        indptr, indices = ld("indptr"), ld("indices")
        g = dgl.graph(("csc", (indptr, indices, torch.tensor([], dtype=torch.int64))),
                      num_nodes=indptr.numel() - 1)
        x = torch.from_numpy(np.load(f"{data}/features.npy")).float()
        if args.dgl_normalize == "row":
            x = x / x.sum(1, keepdim=True).clamp(min=1)
        _graphs[data] = (g, x, ld("labels"), ld("train_idx"), ld("valid_idx"), ld("test_idx"))
    return _graphs[data]


def run_dgl(data, model, seed):
    import random
    import numpy as np, torch, torch.nn as nn, torch.nn.functional as F, dgl, dgl.nn as dglnn
    torch.set_num_threads(T)
    random.seed(seed); np.random.seed(seed); torch.manual_seed(seed); dgl.seed(seed)
    g, x, y, tr, va, te = load_dgl(data)
    loops = model in ("gcn", "gat")
    graph_loops = loops and args.dgl_self_loops == "graph"
    block_loops = loops and args.dgl_self_loops == "block"
    gs = dgl.add_self_loop(dgl.remove_self_loop(g)) if graph_loops else g  # as DGL's examples
    n_cls, L = int(y.max()) + 1, len(fanouts)

    def add_loops(b):  # one self loop per destination, dst ids = the first src ids
        s, d = b.edges()
        ar = torch.arange(b.num_dst_nodes())
        return dgl.create_block((torch.cat([s, ar]), torch.cat([d, ar])),
                                num_src_nodes=b.num_src_nodes(), num_dst_nodes=b.num_dst_nodes())

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList()
            for l in range(L):
                last = l == L - 1
                if model == "gat":
                    i = x.shape[1] if l == 0 else args.hidden * args.heads
                    self.layers.append(dglnn.GATConv(
                        i, n_cls if last else args.hidden, args.out_heads if last else args.heads,
                        feat_drop=args.dropout, attn_drop=args.dropout, negative_slope=0.2))
                    continue
                i, o = x.shape[1] if l == 0 else args.hidden, n_cls if last else args.hidden
                if model == "sage":
                    c = dglnn.SAGEConv(i, o, "mean")
                    if args.dgl_init == "dsp":
                        c.fc_self.reset_parameters(); c.fc_neigh.reset_parameters()
                    nn.init.zeros_(c.fc_self.bias)  # dsp's is zero (DGL 2.1 keeps Linear's)
                else:
                    c = dglnn.GraphConv(i, o, norm="both")
                    if args.dgl_init == "dsp":  # weight is [in, out]: LibTorch's bound by hand
                        nn.init.uniform_(c.weight, -i ** -0.5, i ** -0.5)
                self.layers.append(c)
            self.drop = nn.Dropout(args.dropout)

        def act(self, l, h):  # after layer l
            if model == "gat":
                return h.mean(1) if l == L - 1 else F.elu(h.flatten(1))
            return h if l == L - 1 else self.drop(F.relu(h))

        def forward(self, blocks, h):
            for l, (layer, b) in enumerate(zip(self.layers, blocks)):
                h = self.act(l, layer(add_loops(b) if block_loops else b, h))
            return h

        @torch.no_grad()
        def inference(self, h):  # layer-wise over all nodes, every in-neighbour
            sampler = dgl.dataloading.MultiLayerFullNeighborSampler(1)
            nodes = torch.arange(gs.num_nodes())
            for l, layer in enumerate(self.layers):
                out = None
                for inp, dst, blocks in dgl.dataloading.DataLoader(
                        gs, nodes, sampler, batch_size=gs.num_nodes(), shuffle=False):
                    b = add_loops(blocks[0]) if block_loops else blocks[0]
                    o = self.act(l, layer(b, h[inp]))
                    if out is None:
                        out = torch.zeros(gs.num_nodes(), o.shape[1])
                    out[dst] = o
                h = out
            return h

    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=args.lr, weight_decay=args.wd)
    loader = dgl.dataloading.DataLoader(gs, tr, dgl.dataloading.NeighborSampler(fanouts[::-1]),
                                        batch_size=args.batch, shuffle=True, drop_last=False)
    best = {"best_val": -1.0, "test_at_best": 0.0, "best_epoch": 0}
    vals, tests, losses = [], [], []
    for ep in range(args.epochs):
        net.train()
        tot = cnt = 0
        for inp, out, blocks in loader:
            loss = F.cross_entropy(net(blocks, x[inp]), y[out])
            opt.zero_grad(); loss.backward(); opt.step()
            tot += loss.item(); cnt += 1
        net.eval()
        pred = net.inference(x).argmax(1)
        acc = lambda ids: (pred[ids] == y[ids]).sum().item() / ids.numel()
        v, t = acc(va), acc(te)
        vals.append(v); tests.append(t); losses.append(tot / cnt)
        if v > best["best_val"]:
            best = {"best_val": v, "test_at_best": t, "best_epoch": ep + 1}
    return dict(best, val_curve=vals, test_curve=tests, loss_curve=losses)


def summary(xs):
    return {"mean": statistics.mean(xs), "std": statistics.stdev(xs) if len(xs) > 1 else 0.0,
            "min": min(xs), "max": max(xs)}


def markdown(runs, cmdline, dsp_sha256):
    lines = ["# dsp vs DGL accuracy parity", "", f"Command: `{cmdline}`", ""]
    if dsp_sha256:
        modes = sorted({str(r.get("eval")) for r in runs if r["system"] == "dsp"})
        lines += [f"dsp binary: `{DSP_ARG}` (sha256 {dsp_sha256[:16]}...); dsp evaluation: "
                  + ", ".join(modes), ""]
    lines += [
        f"Test accuracy at the epoch of best validation accuracy, over seeds {args.seeds}; "
        f"fanouts {args.fanouts} (from the seeds), batch {args.batch}, hidden {args.hidden}"
        f" (GAT: {args.heads} heads x {args.hidden}, output {args.out_heads} head(s)), Adam "
        f"lr {args.lr} wd {args.wd}, dropout {args.dropout}, {args.epochs} epochs, "
        f"{T} thread(s). dsp extra flags: `{args.dsp_args or '-'}`; DGL features: "
        f"{args.dgl_normalize}, self loops: {args.dgl_self_loops}, init: {args.dgl_init}; DGL "
        "evaluates with full-neighbour layer-wise inference.", "",
        "| dataset | model | system | mean | std | min | max | per seed | best epochs "
        "| s/run |", "|---|---|---|---|---|---|---|---|---|---|"]
    for data in args.datasets:
        for model in models:
            for system in systems:
                rs = [r for r in runs if (r["dataset"], r["model"], r["system"]) ==
                      (data, model, system)]
                if not rs:
                    continue
                s = summary([r["test_at_best"] for r in rs])
                lines.append(
                    f"| {os.path.basename(data.rstrip('/'))} | {model} | {system} | "
                    f"{s['mean']:.4f} | {s['std']:.4f} | {s['min']:.4f} | {s['max']:.4f} | "
                    + " ".join(f"{r['test_at_best']:.3f}" for r in rs) + " | "
                    + " ".join(str(r["best_epoch"]) for r in rs) + " | "
                    + f"{statistics.mean(r['seconds'] for r in rs):.1f} |")
    return "\n".join(lines) + "\n"


def private_dsp():
    """A private copy of --dsp, so that a rebuild during the runs cannot mix two binaries."""
    import hashlib, shutil
    tmp = tempfile.mkdtemp(prefix="parity-dsp-")
    for attempt in range(30):  # a link in progress: wait for a binary that runs
        try:
            shutil.copy2(args.dsp, f"{tmp}/dsp")
            if subprocess.run([f"{tmp}/dsp", "--help"], capture_output=True).returncode == 0:
                break
        except OSError:
            pass
        time.sleep(10)
    else:
        sys.exit(f"parity: {args.dsp} does not run")
    with open(f"{tmp}/dsp", "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return f"{tmp}/dsp", digest


def main():
    cmdline = shlex.join([sys.executable] + sys.argv)
    runs, dsp_sha256 = [], None
    if "dsp" in systems:
        args.dsp, dsp_sha256 = private_dsp()
    for data in args.datasets:
        for model in models:
            for seed in seeds:
                for system in systems:
                    t0 = time.perf_counter()
                    r = (run_dsp if system == "dsp" else run_dgl)(data, model, seed)
                    r.update(system=system, dataset=data, model=model, seed=seed,
                             seconds=time.perf_counter() - t0)
                    runs.append(r)
                    print(f"parity: {os.path.basename(data.rstrip('/'))} {model} seed {seed} "
                          f"{system}: test@best {r['test_at_best']:.4f} (val {r['best_val']:.4f}, "
                          f"epoch {r['best_epoch']}) {r['seconds']:.1f} s", file=sys.stderr,
                          flush=True)
    if dsp_sha256:
        import shutil
        shutil.rmtree(os.path.dirname(args.dsp))
    md = markdown(runs, cmdline, dsp_sha256)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"command": cmdline, "config": dict(vars(args), dsp=DSP_ARG),
                       "dsp_sha256": dsp_sha256, "runs": runs}, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(md)
    print(md)


if __name__ == "__main__":
    main()
