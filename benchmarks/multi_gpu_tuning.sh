#!/usr/bin/env bash
# Cold bert-base tuning on 1 GPU against 2 (--gpus): empty TileLang kernel cache, no
# tuning cache, a budget no shape reaches, so both runs search the same grid.
#   benchmarks/multi_gpu_tuning.sh OUT_DIR STEP...   STEP: 1 | 2 | compare
set -uo pipefail
out="${1:?usage: multi_gpu_tuning.sh OUT_DIR 1|2|compare...}"; shift; mkdir -p "$out"
for step in "$@"; do case "$step" in
  1|2) TILELANG_CACHE_DIR="$(mktemp -d)" python3 -m evaluator.cli --model bert-base --device cuda --gpus "$step" \
         --no-cache --budget 600 --soak-seconds 0 --no-e2e --targets none --no-pdf \
         --reports "$out/g$step" --store "$out/g$step/store" > "$out/g$step.log" 2>&1
       echo "gpus $step: exit $?" ;;
  compare) python3 - "$out" <<'PY'
import glob, json, sys
r = {n: json.load(open(glob.glob(f"{sys.argv[1]}/g{n}/runs/*/results.json")[0])) for n in (1, 2)}
s = {n: sum(t["tuning_s"] for t in r[n]["tuned"]) for n in r}
print(f"tuning: 1 GPU {s[1]:.1f} s, 2 GPUs {s[2]:.1f} s -> {s[1] / s[2]:.2f}x (goal >= 1.7); kernels stage s:",
      {n: r[n].get("stage_seconds", {}).get("kernels") for n in r})
ob = {n: {(o["family"], tuple(o["shape"])): o.get("ratio") or {} for o in r[n]["op_bench"]} for n in r}
for t in r[1]["tuned"]:
    k = (t["family"], tuple(t["shape"]))
    u = next(x for x in r[2]["tuned"] if (x["family"], tuple(x["shape"])) == k)
    a, b = ob[1].get(k, {}), ob[2].get(k, {})
    same = "same config" if t["config"] == u["config"] else f"configs differ: {t['config']} | {u['config']}"
    print(*k, same, "| vs torch: 1 GPU {value:.3f} [{low:.3f}-{high:.3f}]".format(**a) if a else "",
          "2 GPUs {value:.3f} [{low:.3f}-{high:.3f}]".format(**b) if b else "")
PY
  ;; esac; done
