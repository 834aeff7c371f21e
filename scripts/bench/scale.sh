#!/usr/bin/env bash
# The "Scale" section of docs/benchmarks.md: papers100M-shaped community graphs (111,059,956 nodes,
# 1,615,685,872 edges, 172 classes, papers100M's split sizes in full) generated out of core at
# fractions of that size, partitioned into 2 parts (bfs-blocks) and into 1 with the features read
# by reference (no second copy of them on disk), sampled (`dsp bench sample`) and trained with
# `dsp train` itself at 2 ranks and at 1 (a few hundred steps, then validation and test), each
# phase timed with its peak RSS (/usr/bin/time -v) and the disk it took, and a plot of both
# against size. Not part of CI: at full size with 128 float16 columns it needs about 60 GB of disk
# (the dataset 43 GB, a partition 16 GB) and over an hour.
#
# Usage: scripts/bench/scale.sh [--fractions 1/64,1/8] [--features 128] [--budget 4G] [--steps 300]
#                         [--eval-max-nodes 0] [--cache-ratio 0] [--out out/scale] [--keep]
#                         [--reuse] [--no-build]
#   --fractions  which fractions a/b of papers100M to run (default 1/64,1/8; 1/1 is the full size)
#   --features   float16 feature columns (default 128, papers100M's: 256 bytes a node)
#   --budget     --memory-budget of `dsp generate` (default 4G: out of core, as the full size needs)
#   --steps      training steps per rank (`dsp train --epochs 1 --max-steps`)
#   --eval-max-nodes  validate and test on about N nodes of each split (`dsp train
#                --eval-max-nodes`; 0: every node). Each size's table row shows the steps and N
#                it ran with (OUT/results/params<p>_<a>-<b>.txt)
#   --cache-ratio  train with PaGraph's cache of each part's R hottest nodes by in-degree (`dsp train
#                --cache-policy in-degree --cache-ratio R`; 0: none, every row read where it is
#                stored). Beyond memory this is what keeps the hot rows off the disk; the row
#                shows R
#   --out        where datasets, partitions and results go (results under OUT/results)
#   --keep       keep the datasets and partitions (default: deleted as soon as they are used)
#   --reuse      skip a phase whose result (OUT/results/<phase>_<a>-<b>.time) exists, e.g. after
#                running the largest size's phases by hand with the commands below
# The 2-part partition is deleted before the 1-part one is written (disk), unless --keep.
# Writes the Scale section of docs/benchmarks.md and docs/img/scale.svg in place.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$here"
fractions=1/64,1/8 features=128 budget=4G steps=300 eval_max=0 cache=0 out=out/scale keep=0
reuse=0 build=1
usage="usage: scripts/bench/scale.sh [--fractions 1/64,1/8] [--features 128] [--budget 4G] [--steps 300] [--eval-max-nodes 0] [--cache-ratio 0] [--out DIR] [--keep] [--reuse] [--no-build]"
while (($#)); do
  case "$1" in
    --fractions) fractions="$2"; shift ;;
    --features) features="$2"; shift ;;
    --budget) budget="$2"; shift ;;
    --steps) steps="$2"; shift ;;
    --eval-max-nodes) eval_max="$2"; shift ;;
    --cache-ratio) cache="$2"; shift ;;
    --out) out="$2"; shift ;;
    --keep) keep=1 ;;
    --reuse) reuse=1 ;;
    --no-build) build=0 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
  shift
done
if ((build)); then cmake --build build -j2 --target dsp; fi
# DSP_BIN: the dsp binary to run (default build/tools/dsp), e.g. a copy, so that rebuilding the
# tree during an hour-long run does not change the binary between phases.
dsp="${DSP_BIN:-$here/build/tools/dsp}"
commit="$(git rev-parse --short HEAD)"  # the report names the commit the run started at
res="$out/results"
mkdir -p "$res"
# Features and topology read through their mappings (page cache as the cold tier): no anonymous
# huge-page copies, which at this size would take most of the memory (core/huge_pages.hpp).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 DSP_HUGE_PAGES=0
log() { echo "scale.sh [$(date +%T)] $*" >&2; }
# Runs "$@" under time -v into $res/<name>.{log,time} (unless --reuse finds them).
timed() {
  local name="$1"; shift
  if ((reuse)) && [[ -s "$res/$name.time" ]]; then log "reusing $res/$name.time"; return; fi
  log "$name: $*"
  nice -n 19 ionice -c3 /usr/bin/time -v -o "$res/$name.time" "$@" >"$res/$name.log" 2>&1
}
# "<wall s> <peak RSS KiB>" of a timed phase (for mpirun: the largest rank's peak).
figures() {
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$res/$1.time" |
         awk -F: '{ if (NF == 3) print $1 * 3600 + $2 * 60 + $3; else print $1 * 60 + $2 }')
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$res/$1.time")
  echo "$wall $rss"
}
json() { /usr/bin/python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print($1)" "$2"; }

summary="$res/summary.tsv"  # size, nodes, entries, disk, then phase wall/rss pairs
: >"$summary"
IFS=, read -ra fr <<<"$fractions"
for f in "${fr[@]}"; do
  a=${f%/*} b=${f#*/} tag="${f%/*}-${f#*/}"
  nodes=$((111059956 * a / b))
  edges=$((1615685872 * a / b))
  # About 10,000 nodes per community (172 at least, one per class): communities of papers100M's
  # mean degree that do not force repeated edges.
  comms=$((nodes / 10000 > 172 ? nodes / 10000 : 172))
  ds="$out/papers-$tag"
  log "$f: $nodes nodes, $edges undirected edges drawn"
  # With --reuse, a dataset deleted after its phases ran is generated again only if one is missing.
  missing=0
  for ph in generate partition2 sample2 train2 partition1 sample1 train1; do
    [[ -s "$res/${ph}_$tag.time" ]] || missing=1
  done
  if ! ((reuse)) || { ((missing)) && [[ ! -d "$ds" ]]; }; then
    rm -rf "$ds" "$res/generate_$tag.time"
  fi
  timed "generate_$tag" "$dsp" generate community "$ds" --nodes "$nodes" --edges "$edges" \
    --communities "$comms" --features "$features" --feature-dtype float16 --classes 172 \
    --splits papers100m --memory-budget "$budget" --out-of-core
  [[ -d "$ds" ]] && echo "$(du -sb "$ds" | awk '{print $1}')" \
    "$("$dsp" info --json --no-validate "$ds" | json 'd["num_edges"]' /dev/stdin)" \
    >"$res/dataset_$tag.txt"
  read -r disk entries <"$res/dataset_$tag.txt"
  for p in 2 1; do
    pd="$ds-p$p"
    run=(mpirun -np "$p")
    # A phase to run on a partition that is gone: partition again.
    for ph in sample train; do
      if [[ ! -d "$pd" && ! -s "$res/$ph${p}_$tag.time" ]]; then
        rm -f "$res/partition${p}_$tag.time"
      fi
    done
    timed "partition${p}_$tag" "$dsp" partition "$ds" "$pd" -p "$p" --method bfs-blocks \
      --cache-policy none --feature-storage reference --overwrite
    [[ -d "$pd" ]] && du -sb "$pd" | awk '{print $1}' >"$res/partdisk${p}_$tag.txt"
    timed "sample${p}_$tag" "${run[@]}" "$dsp" bench sample "$pd" --fanouts 15,10,5 \
      --batch-size 1024 --batches 50 --json "$res/sample${p}_$tag.json"
    # dsp train as a user runs it: one epoch of --steps steps, then validation and test (--eval
    # auto chooses and logs how), the epoch line and --metrics record with their times.
    if ! ((reuse)) || [[ ! -s "$res/train${p}_$tag.time" ]]; then
      rm -f "$res/train${p}_$tag.jsonl"
      echo "$steps $eval_max $cache" >"$res/params${p}_$tag.txt"
    fi
    timed "train${p}_$tag" "${run[@]}" "$dsp" train "$pd" --epochs 1 --max-steps "$steps" \
      --eval-max-nodes "$eval_max" --fanouts 15,10,5 --batch-size 1024 --hidden 256 \
      --no-progress --metrics "$res/train${p}_$tag.jsonl" --cache-policy in-degree \
      --cache-ratio "$cache"
    if ((!keep)); then rm -rf "$pd"; fi
  done
  if ((!keep)); then rm -rf "$ds"; fi
  row="$f	$nodes	$entries	$disk"
  for ph in generate partition2 sample2 train2 partition1 sample1 train1; do
    row+="	$(figures "${ph}_$tag" | tr ' ' '\t')"
  done
  for p in 2 1; do
    row+="	$(json '"%.2f" % (d["modes"][0]["sampled_edges_per_s"] / 1e6)' "$res/sample${p}_$tag.json")"
  done
  for p in 2 1; do  # ms per step, steps, eval s, test accuracy (the metrics record of the epoch)
    row+="	$(json '"%.0f\t%d\t%.1f\t%.4f" % (1e3 * d["pipeline"]["wall_s"] / d["pipeline"]["steps"], d["pipeline"]["steps"], d["eval_s"], d["test_acc"])' "$res/train${p}_$tag.jsonl")"
    row+="	$(cat "$res/partdisk${p}_$tag.txt")"
  done
  row+="	$(grep -o '[0-9]* sorted runs, [0-9.]* [KMG]*i*B spilled' "$res/generate_$tag.log" || echo "in memory")"
  for p in 2 1; do row+="	$(cat "$res/params${p}_$tag.txt")"; done  # steps cap, eval nodes, cache
  echo "$row" >>"$summary"
done

# Tables, the plot and the section from the summary.
/usr/bin/python3 - "$summary" "$features" "$budget" "$steps" "$(nproc)" \
  "$(free -g | awk '/Mem:/ {print $2}')" "$commit" <<'PY'
import re, sys, time
summary, features, budget, steps, cores, mem, commit = sys.argv[1:]
phases = ["generate", "partition2", "sample2", "train2", "partition1", "sample1", "train1"]
rows = []
for line in open(summary):
    c = line.rstrip("\n").split("\t")
    r = {"size": c[0], "nodes": int(c[1]), "entries": int(c[2]), "disk": int(c[3])}
    for i, ph in enumerate(phases):
        r[ph] = (float(c[4 + 2 * i]), int(c[5 + 2 * i]) / 1048576)
    r["meps2"], r["meps1"] = c[18:20]
    for k, p in ((20, "2"), (25, "1")):
        r["ms" + p], r["steps" + p], r["eval" + p], r["acc" + p] = c[k:k + 4]
        r["pdisk" + p] = int(c[k + 4])
    r["runs"] = c[30]
    for k, p in ((31, "2"), (32, "1")):  # "<--max-steps> <--eval-max-nodes> [<--cache-ratio>]"
        cap, ev, *cache = c[k].split()
        r["cap" + p] = (f"--max-steps {cap}" + (f", --eval-max-nodes {ev}" if ev != "0" else "") +
                        (f", --cache-ratio {cache[0]}" if cache and float(cache[0]) > 0 else ""))
    rows.append(r)

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
xs = [r["nodes"] / 1e6 for r in rows]
for ph in phases:
    ax1.plot(xs, [r[ph][0] for r in rows], marker="o", label=ph)
    ax2.plot(xs, [r[ph][1] for r in rows], marker="o", label=ph)
for ax, what in ((ax1, "wall time (s)"), (ax2, "peak RSS (GiB)")):
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("nodes (millions; papers100M: 111)")
    ax.set_ylabel(what)
    ax.grid(True, which="both", alpha=0.3)
ax2.axhline(20, color="red", linestyle="--", linewidth=1)
ax1.legend(fontsize=7)
fig.suptitle(f"papers100M-shaped community graphs, {features} float16 features ({cores} cores, {mem} GiB)")
fig.tight_layout()
fig.savefig("docs/img/scale.svg")

gib = lambda b: f"{b / 2**30:.1f} GiB"
ph = lambda r, p: f"{r[p][0]:.0f} s / {r[p][1]:.1f}"
lines = [
    "## Scale", "",
    f"papers100M-shaped community graphs generated out of core, partitioned, sampled and trained with `dsp train` (`scripts/bench/scale.sh`; machine: {cores} cores, {mem} GiB, shared with other builds; {time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}, commit {commit}). Full size: 111,059,956 nodes, 1,615,685,872 undirected edges drawn (each stored in both directions), 172 classes, papers100M's splits (`--splits papers100m`: 1,207,179 / 125,265 / 214,338 at full size, scaled); {features} float16 feature columns. Each phase: wall time (s) / peak RSS (GiB) from `/usr/bin/time -v` (under mpirun: the largest rank's). Generation: `--memory-budget {budget} --out-of-core`. Partitions: `--method bfs-blocks --cache-policy none --feature-storage reference` (the ranks read the dataset's features through the id map: no second copy on disk). Sampling: `dsp bench sample`, 1 thread per rank, fanouts [15,10,5], 1024 seeds per rank and batch, 50 batches (M edges/s: all ranks). Training: `dsp train PARTITION --epochs 1 --fanouts 15,10,5 --batch-size 1024 --hidden 256` (GraphSAGE, Adam) with the `--max-steps`, `--eval-max-nodes` and `--cache-ratio` (with `--cache-policy in-degree`; none shown: no cache) each row shows, then validation and test as `--eval auto` chooses; ms per step, the evaluation's seconds and the test accuracy from its --metrics record.", "",
    "| size | nodes | stored entries | dataset | partition -p 2 | partition -p 1 | sort |", "|---|---|---|---|---|---|---|"]
for r in rows:
    lines.append(f"| {r['size']} | {r['nodes']:,} | {r['entries']:,} | {gib(r['disk'])} | {gib(r['pdisk2'])} | {gib(r['pdisk1'])} | {r['runs']} |")
lines += ["", "| size | generate | partition -p 2 | sample, 2 ranks | dsp train, 2 ranks | partition -p 1 | sample, 1 rank | dsp train, 1 rank |", "|---|---|---|---|---|---|---|---|"]
for r in rows:
    lines.append(f"| {r['size']} | {ph(r, 'generate')} | {ph(r, 'partition2')} | {ph(r, 'sample2')}: {r['meps2']} M edges/s | {ph(r, 'train2')}: {r['ms2']} ms/step ({r['steps2']} steps; {r['cap2']}), eval {r['eval2']} s, test acc {r['acc2']} | {ph(r, 'partition1')} | {ph(r, 'sample1')}: {r['meps1']} M edges/s | {ph(r, 'train1')}: {r['ms1']} ms/step ({r['steps1']} steps; {r['cap1']}), eval {r['eval1']} s, test acc {r['acc1']} |")
lines += ["", "![time and peak RSS against size](img/scale.svg)", ""]
section = "\n".join(lines) + "\n"
path = "docs/benchmarks.md"
text = open(path).read()
m = re.search(r"^## Scale\n", text, re.M)
notes = ""
if m:
    nxt = re.search(r"^## |^<!-- peer-bench", text[m.end():], re.M)
    end = m.end() + nxt.start() if nxt else len(text)
    old = text[m.start():end]
    # Hand-written notes after the generated part are kept.
    k = old.find("<!-- scale:notes -->")
    notes = old[k:].rstrip() + "\n" if k >= 0 else ""
    text = text[:m.start()] + section + ("\n" + notes if notes else "") + ("\n" + text[end:] if nxt else "")
else:
    text = text.rstrip() + "\n\n" + section
open(path, "w").write(text)
PY
log "wrote the Scale section of docs/benchmarks.md and docs/img/scale.svg"
