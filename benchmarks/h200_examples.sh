#!/usr/bin/env bash
# The committed H200 examples (reports/examples/<model>/h200/<date>/, and the kernel
# profiles in reports/examples/kernels/h200-<date>/): models nobody here wrote, at the
# sizes a user runs them, the zoo's bert-base and llama, and conv2d on ResNet-50 layers.
# Each model run profiles, tunes, verifies, times on CUDA-graph replay (eager and the
# profiler's kernel sum beside it), routes calls at the operator, soaks, and records a
# baseline in one store, so the PDFs are rendered on another machine with
#   evaluate report --baseline ID --store STORE
#
#   benchmarks/h200_examples.sh OUT_DIR KEY...
#   KEY: hf-bert hf-gpt2 hf-llama timm-vit tv-resnet50 bert-base llama conv2d
#        capture-path capture-path-gpt2 in-sequence-gelu ncu-gemm ncu-gelu ncu-streamk ncu-width ncu-swap ncu-tiles ncu-attn
#        ncu-attn-pingpong
#        bert-base-defaults llama-defaults   (every option at its default; run cold, with
#        an empty TileLang kernel cache and tuning cache, then warm; wall times go to
#        OUT_DIR/wall_times.txt)
#
# Budgets are short so that a run fits a time-limited GPU machine: --budget 8 --fine-rounds 0
# --max-shapes 4 --soak-seconds 10 (the defaults, 60 s and 3 rounds, search further).
# EVAL_FLAGS="--ops 3 ..." is appended to every model run (after the model's own options,
# so it wins), e.g. to rewrite a third family.
#
#   ncu-gemm: Nsight Compute on ViT-B's two slowest GEMMs, each beside cuBLAS, with the
#   configs the tuner picked on the H200: OUT_DIR/ncu_gemm_*.txt
#   (reports/examples/kernels/h200-2026-12-02/ncu-gemm/; each ncu-* key's files sit in a
#   folder named after it under reports/examples/kernels/h200-<date>/)
set -uo pipefail
out="${1:?usage: h200_examples.sh OUT_DIR KEY...}"; shift
mkdir -p "$out"
common=(--device cuda --budget 8 --fine-rounds 0 --max-shapes 4 --soak-seconds 10 --no-pdf
        --reports "$out/reports" --store "$out/store")
# Model options come last, so a model may override a common one (the last one wins).
read -ra extra <<< "${EVAL_FLAGS:-}"
# The whole terminal output goes to OUT_DIR/terminal_<key>.log as it is written (a run cut
# by a time limit keeps what it printed); the last 40 lines are echoed.
run() {
  local log="$out/terminal_${key}.log"
  echo "== evaluate $* ${extra[*]}"
  python3 -m evaluator.cli "${common[@]}" "$@" "${extra[@]}" 2>&1 | grep --line-buffered -v "TileLang:" > "$log"
  tail -40 "$log"
}
ncu_one() {  # NAME SHAPE CONFIG_JSON [FAMILY]
  ncu --clock-control none --nvtx --nvtx-include "evidence/" --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section LaunchStats \
    --section InstructionStats python3 benchmarks/ncu_target.py "${4:-gemm}" "$2" "$3" > "$out/ncu_${4:-gemm}_$1.txt" 2>&1
  echo "ncu $1 rc $?"
}
for key in "$@"; do
  case "$key" in
    hf-bert) run --model hf:BertModel --batch-size 8 --seq-len 128 --name hf-bert-base ;;
    hf-gpt2) run --model hf:GPT2Model --batch-size 4 --seq-len 512 --name hf-gpt2 ;;
    timm-vit) run --model timm:vit_base_patch16_224 --batch-size 16 --name timm-vit-base ;;
    # transformers' LlamaModel at TinyLlama's widths (4 of its 22 layers): LlamaRMSNorm is
    # written out, found by what it computes (evaluator/written.py), fused with its residual
    hf-llama) run --model "hf:LlamaModel,num_hidden_layers=4,hidden_size=2048,intermediate_size=5632,num_attention_heads=32,num_key_value_heads=4" \
                  --batch-size 4 --seq-len 512 --name hf-llama-tinyllama-4l --ops 3 ;;
    # ResNet-50 calls 23 distinct convolutions: all of them are tuned (6 s each), or most
    # of its calls would fall back and the run would measure cuDNN.
    tv-resnet50) run --model torchvision:resnet50 --batch-size 32 --name torchvision-resnet50 --max-shapes 24 \
                     --budget 6 ;;
    bert-base|llama) run --model "$key" ;;
    bert-base-defaults|llama-defaults)
      m="${key%-defaults}"
      for pass in cold warm; do
        [ "$pass" = cold ] && export TILELANG_CACHE_DIR="$(mktemp -d)"
        t0=$(date +%s)
        python3 -m evaluator.cli --model "$m" --device cuda --no-pdf --reports "$out/defaults" \
          --store "$out/store" 2>&1 | grep -v "TileLang:" | tail -25
        echo "$m $pass $(( $(date +%s) - t0 )) s" | tee -a "$out/wall_times.txt"
      done
      unset TILELANG_CACHE_DIR ;;
    conv2d)  # ResNet-50 stem and 1x1 layers at batch 32 as torchvision runs them (NCHW): N x H x W x C x K x R x S x stride x pad x nchw
      python3 -m evaluator.cli bench --family conv2d --device cuda --budget 8 --json \
        --shape 32x224x224x3x64x7x7x2x3x1 --shape 32x56x56x64x64x1x1x1x0x1 --shape 32x56x56x64x256x1x1x1x0x1 \
        --shape 32x56x56x64x64x3x3x1x1x1 --shape 32x14x14x1024x256x1x1x1x0x1 > "$out/conv2d_bench.json" ;;
    ncu-gemm)
      t='"block_K": 64, "num_stages": 5, "swizzle": true, "panel": 10, "split_k": 1, "splitk_fused": false, "cluster": 0'
      ncu_one pingpong_3152x3072x768 3152x3072x768 \
        "{\"block_M\": 128, \"block_N\": 128, \"threads\": 128, \"policy\": \"square\", \"persistent\": 132, \"pingpong\": 1, $t}"
      ncu_one wave_3152x768x768 3152x768x768 \
        "{\"block_M\": 128, \"block_N\": 160, \"threads\": 256, \"policy\": \"fullrow\", \"persistent\": 0, \"pingpong\": 0, $t}" ;;
    ncu-gelu)
      t='"block_K": 64, "swizzle": true, "panel": 10, "split_k": 1, "splitk_fused": false, "cluster": 0'
      pp="{\"block_M\": 128, \"block_N\": 128, \"num_stages\": 5, \"threads\": 128, \"policy\": \"square\", \"persistent\": 132, \"pingpong\": 1, $t}"
      ncu_one pingpong_3152x3072x768 3152x3072x768 "$pp" gemm_gelu
      ncu_one pingpong_3152x3072x768 3152x3072x768 "$pp" gemm
      ncu_one wave_3152x3072x768 3152x3072x768 \
        "{\"block_M\": 128, \"block_N\": 208, \"num_stages\": 4, \"threads\": 256, \"policy\": \"fullrow\", \"persistent\": 0, \"pingpong\": 0, $t}" gemm_gelu ;;
    in-sequence-gelu)
      t='"block_K": 64, "swizzle": true, "panel": 10, "split_k": 1, "splitk_fused": false, "cluster": 0, "stream_k": 0'
      python3 benchmarks/in_sequence.py gemm_gelu 3152x3072x768 --json "$out/in_sequence_gelu.json" \
        "{\"block_M\": 128, \"block_N\": 128, \"num_stages\": 4, \"threads\": 128, \"policy\": \"square\", \"persistent\": 132, \"pingpong\": 1, $t}" \
        "{\"block_M\": 128, \"block_N\": 208, \"num_stages\": 4, \"threads\": 256, \"policy\": \"fullrow\", \"persistent\": 0, \"pingpong\": 0, $t}"
      python3 benchmarks/in_sequence.py gemm 3152x3072x768 --json "$out/in_sequence_gemm.json" \
        "{\"block_M\": 128, \"block_N\": 128, \"num_stages\": 5, \"threads\": 128, \"policy\": \"square\", \"persistent\": 132, \"pingpong\": 1, $t}" ;;
    ncu-streamk)  # why stream-K loses at ViT-B's 3152x3072x768 (12 k-steps) and wins at 8192^3
      t='"block_M": 128, "block_N": 128, "block_K": 64, "num_stages": 5, "threads": 128, "policy": "square", "persistent": 132, "pingpong": 1, "swizzle": true, "panel": 10, "split_k": 1, "splitk_fused": false, "cluster": 0'
      for shape in 3152x3072x768 8192x8192x8192; do
        ncu_one "pingpong_${shape}" "$shape" "{$t, \"stream_k\": 0}"
        ncu_one "streamk_${shape}" "$shape" "{$t, \"stream_k\": 1}"
      done ;;
    ncu-width)  # why ping-pong tiles of 152 and 120 columns, which fill the SMs better, ran slower than 128
      t='"block_M": 128, "block_K": 64, "threads": 128, "policy": "square", "persistent": 132, "pingpong": 1, "swizzle": true, "panel": 10, "split_k": 1, "splitk_fused": false, "cluster": 0, "stream_k": 0'
      # NCU_WIDTHS="128:5 144:4 160:4" (width:stages) profiles others: 144 lost to 96 and 128 where it balanced as well or better.
      for w in ${NCU_WIDTHS:-128:5 152:4 120:4}; do
        ncu_one "pingpong_3152x3072x768_bN${w%:*}" 3152x3072x768 "{$t, \"block_N\": ${w%:*}, \"num_stages\": ${w#*:}}"
      done ;;
    ncu-swap)  # y's transpose in 128x144 tiles (four full rounds at ViT-B's 3152x3072x768) beside 128x128
      t='"block_M": 128, "block_K": 64, "threads": 128, "policy": "square", "persistent": 132, "pingpong": 1, "swizzle": true, "panel": 10, "split_k": 1, "splitk_fused": false, "cluster": 0, "stream_k": 0'
      ncu_one pingpong_3152x3072x768_bN128 3152x3072x768 "{$t, \"block_N\": 128, \"num_stages\": 5}"
      ncu_one swap_3152x3072x768_bN144 3152x3072x768 "{$t, \"block_N\": 144, \"num_stages\": 4, \"swap_ab\": 1}"
      ncu_one swapdirect_3152x3072x768_bN144 3152x3072x768 "{$t, \"block_N\": 144, \"num_stages\": 6, \"swap_ab\": 1, \"direct\": 1}" ;;
    ncu-tiles)  # NCU_TILES="SHAPE:block_N:stages:swap_ab ..." ping-pong tiles of 128 rows, cuBLAS beside each
      t='"block_M": 128, "block_K": 64, "threads": 128, "policy": "square", "persistent": 132, "pingpong": 1, "swizzle": true, "panel": 10, "split_k": 1, "splitk_fused": false, "cluster": 0, "stream_k": 0'
      for spec in ${NCU_TILES:?NCU_TILES=\"3152x2304x768:144:4:1 ...\"}; do
        IFS=: read -r shape bn st sw <<< "$spec"
        ncu_one "pp_${shape}_bN${bn}x${st}_swap${sw}" "$shape" "{$t, \"block_N\": $bn, \"num_stages\": $st, \"swap_ab\": $sw}"
      done ;;
    ncu-attn)  # the attention misses at 4096²: head dim 64 causal on its first config and with
      # its loop count split (ptxas serializes the first's wgmma, C7514), and ViT-B's s197 first config
      a='"block_M": 64, "num_stages": 2, "threads": 128, "overlap": true'
      ncu_one first_4x32x4096x4096x64x1 4x32x4096x4096x64x1 "{$a, \"block_N\": 128}" attention
      ncu_one split_4x32x4096x4096x64x1 4x32x4096x4096x64x1 "{$a, \"block_N\": 128, \"split_count\": true}" attention
      ncu_one first_16x12x197x197x64x0 16x12x197x197x64x0 "{$a, \"block_N\": 64}" attention ;;
    ncu-attn-pingpong)  # FlashAttention-3's forward written out (`pingpong`) beside the measured first configs
      p='"block_M": 128, "num_stages": 2, "threads": 256, "pingpong": true'
      ncu_one pingpong_4x32x4096x4096x128x0 4x32x4096x4096x128x0 "{$p, \"block_N\": 128}" attention
      ncu_one ws_4x32x4096x4096x128x0 4x32x4096x4096x128x0 \
        '{"block_M": 128, "block_N": 128, "num_stages": 1, "threads": 256}' attention
      ncu_one pingpong_4x32x4096x4096x64x1 4x32x4096x4096x64x1 "{$p, \"block_N\": 128}" attention ;;
    capture-path)  # what transformers' BertModel calls eagerly and while a graph is captured
      python3 benchmarks/capture_path.py hf:BertModel --batch-size 8 --seq-len 128 --json "$out/capture_path_hf-bert.json" ;;
    capture-path-gpt2)  # which call stops GPT-2's capture when it is hidden from the model
      python3 benchmarks/capture_path.py hf:GPT2Model --batch-size 4 --seq-len 512 --json "$out/capture_path_hf-gpt2.json" ;;
    *) echo "unknown key $key" >&2; exit 2 ;;
  esac
done
