#!/usr/bin/env bash
# The "Scale" section of docs/benchmarks.md: papers100M-shaped community graphs (111,059,956 nodes,
# 1,615,685,872 edges, 128 float16 features, 172 classes in full) generated out of core at
# fractions of that size, then sampled, each phase timed with its peak RSS (/usr/bin/time -v).
# Not part of CI: at 1/8 it writes about 9 GB and runs for minutes.
#
# Usage: scripts/scale.sh [--fractions 64,8] [--budget 4G] [--keep] [--no-build]
#   --fractions  which fractions of papers100M to run (default 64,8; 1 is the full size)
#   --budget     --memory-budget of `dsp generate` (default 2G: the out-of-core path under a
#                budget below the graph, as the full size needs)
#   --keep       keep the generated datasets under out/scale/ (default: deleted after measuring)
# Results: out/scale/results/*.time (time -v) and *.log; the section is rewritten in place.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
fractions=64,8 budget=2G keep=0 build=1
while (($#)); do
  case "$1" in
    --fractions) fractions="$2"; shift ;;
    --budget) budget="$2"; shift ;;
    --keep) keep=1 ;;
    --no-build) build=0 ;;
    *) echo "usage: scripts/scale.sh [--fractions 64,8] [--budget 4G] [--keep] [--no-build]" >&2
       exit 2 ;;
  esac
  shift
done
if ((build)); then cmake --build build -j2 --target dsp; fi
dsp=build/tools/dsp
out=out/scale
res="$out/results"
mkdir -p "$res"
log() { echo "scale.sh [$(date +%T)] $*" >&2; }
# Runs "$@" under time -v into $res/<name>.{log,time}; prints "<wall s> <peak RSS KiB>".
timed() {
  local name="$1"; shift
  /usr/bin/time -v -o "$res/$name.time" "$@" >"$res/$name.log" 2>&1
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$res/$name.time" |
         awk -F: '{ if (NF == 3) print $1 * 3600 + $2 * 60 + $3; else print $1 * 60 + $2 }')
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$res/$name.time")
  echo "$wall $rss"
}
rows=()
IFS=, read -ra fr <<<"$fractions"
for f in "${fr[@]}"; do
  nodes=$((111059956 / f))
  edges=$((1615685872 / f))
  # About 10,000 nodes per community (172 at least, one per class): communities of papers100M's
  # mean degree that do not force repeated edges.
  comms=$((nodes / 10000 > 172 ? nodes / 10000 : 172))
  ds="$out/papers-1-$f"
  rm -rf "$ds"
  log "1/$f: $nodes nodes, $edges undirected edges drawn"
  read -r gwall grss < <(timed "generate_$f" "$dsp" generate community "$ds" --nodes "$nodes" \
    --edges "$edges" --communities "$comms" --features 128 --feature-dtype float16 --classes 172 \
    --memory-budget "$budget" --out-of-core)
  disk=$(du -sb "$ds" | awk '{print $1}')
  entries=$("$dsp" info --json --no-validate "$ds" | /usr/bin/python3 -c \
    'import json, sys; print(json.load(sys.stdin)["num_edges"])')
  read -r pwall prss < <(timed "partition_$f" "$dsp" partition "$ds" "$ds-p1" -p 1 \
    --cache-policy none)
  read -r swall srss < <(timed "sample_$f" "$dsp" bench sample "$ds-p1" --fanouts 15,10,5 \
    --batch-size 1024 --batches 50 --json "$res/sample_$f.json")
  meps=$(/usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
print("%.1f" % (d["modes"][0]["sampled_edges_per_s"] / 1e6))' "$res/sample_$f.json")
  runs=$(grep -o '[0-9]* sorted runs, [0-9.]* [KMG]*i*B spilled' "$res/generate_$f.log" || echo "in memory")
  rows+=("| 1/$f | $nodes | $edges | $entries | $(numfmt --to=iec "$disk") | ${gwall} s / $((grss / 1024)) MiB | $runs | ${pwall} s / $((prss / 1024)) MiB | ${swall} s / $((srss / 1024)) MiB | $meps |")
  if ((!keep)); then rm -rf "$ds" "$ds-p1"; fi
  last=("$f" "$disk" "$gwall" "$pwall")
done
# The full size, extrapolated linearly from the largest fraction run (sorting is n log n, so time
# is a lower bound); the runs hold 8 bytes per stored direction of every drawn edge.
extrapolation=$(/usr/bin/python3 - "${last[@]}" <<'PY'
import sys
f, disk, gen, part = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
runs = 8 * 2 * 1615685872
print(f"Full size, extrapolated from 1/{f}: the dataset takes about {disk * f / 1e9:.0f} GB "
      f"(the 1-part partition as much again), the sorted runs up to {runs / 1e9:.1f} GB while "
      f"merging (deleted before the features are written), generation about "
      f"{gen * f / 60:.0f} min and a 1-part partition about {part * f / 60:.0f} min at least.")
PY
)

section=$(cat <<MD
## Scale

papers100M-shaped community graphs generated out of core (\`scripts/scale.sh\`; machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD)). Full size: 111,059,956 nodes, 1,615,685,872 undirected edges drawn, 128 float16 features, 172 classes. Each phase: wall time / peak RSS from \`/usr/bin/time -v\`; generation runs with \`--memory-budget $budget --out-of-core\` (edges through an external sort on disk, node data streamed). Sampling: \`dsp bench sample\`, 1 rank, 1 thread, fanouts [15,10,5], 1024 seeds per batch, 50 batches, over a 1-part partition (features memory-mapped).

| size | nodes | edges drawn | stored entries | disk | generate | sort | partition -p 1 | bench sample | M edges/s |
|---|---|---|---|---|---|---|---|---|---|
$(printf '%s\n' "${rows[@]}")

$extrapolation

Peak RSS counts the pages of mapped files: \`partition\` and \`bench sample\` map the dataset (page cache, which the kernel reclaims under pressure), so their figures grow with the files read, not with anonymous memory.

Commands (for fraction F of papers100M):

    build/tools/dsp generate community out/scale/papers-1-F --nodes 111059956/F --edges 1615685872/F --communities max(172, nodes/10000) --features 128 --feature-dtype float16 --classes 172 --memory-budget $budget --out-of-core
    build/tools/dsp partition out/scale/papers-1-F out/scale/papers-1-F-p1 -p 1 --cache-policy none
    build/tools/dsp bench sample out/scale/papers-1-F-p1 --fanouts 15,10,5 --batch-size 1024 --batches 50
MD
)
/usr/bin/python3 - "$section" <<'PY'
import re, sys
path = "docs/benchmarks.md"
text = open(path).read()
section = sys.argv[1].rstrip() + "\n"
m = re.search(r"^## Scale\n", text, re.M)
if m:
    nxt = re.search(r"^## ", text[m.end():], re.M)
    end = m.end() + nxt.start() if nxt else len(text)
    text = text[:m.start()] + section + ("\n" + text[end:] if nxt else "")
else:
    text = text.rstrip() + "\n\n" + section
open(path, "w").write(text)
PY
log "wrote the Scale section of docs/benchmarks.md"
