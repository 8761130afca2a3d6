#!/usr/bin/env bash
# Seed 004's GeoMNIST (elastic_sde.geomnist) at the paper scale on one GPU, in pieces: each call runs for at most
# PIECE seconds (default 470, under 8 minutes) and then stops; the next call resumes from the checkpoints in STORE
# (the batch-1 SGD loop checkpoints every CHECKPOINT minutes). Run it until it exits 0. The paper scale: 3
# replicates × 100 LeNets × 10⁵ iterations in float64, Fig. D.3's n_tr sweep (80, 480, 600, 4800) and the untrained
# control, 500 LE-ODE runs.
#
#   docs/reproduction/scripts/004_paper_gpu.sh STORE RESULTS [SCALE] [DEVICE] [PIECE] [CHECKPOINT]
#
# STORE: the run store (keep it between calls; it holds the checkpoints). RESULTS: where the claims, report,
# metrics, figures and the runs that fit are copied, without checkpoints. A file over 16 MiB (at the paper scale the
# runs: a run's logits are 300 × 10⁵ × 3 values) stays in STORE and is named in RESULTS/left_out.txt with its size.
# SCALE defaults to paper, DEVICE to cuda. Exit status: 0 finished and copied; 3 the piece's time ran out (call
# again); anything else: an error.
set -u
store=${1:?usage: 004_paper_gpu.sh STORE RESULTS [SCALE] [DEVICE] [PIECE] [CHECKPOINT]}
results=${2:?usage: 004_paper_gpu.sh STORE RESULTS [SCALE] [DEVICE] [PIECE] [CHECKPOINT]}
scale=${3:-paper}
device=${4:-cuda}
piece=${5:-470}
checkpoint=${6:-2}
repdyn=${REPDYN:-repdyn}
limit=${RESULTS_LIMIT:-$((16 * 1024 * 1024))}  # bytes; the test sets a small one
experiment=elastic_sde.geomnist
# shellcheck disable=SC2086  # REPDYN may be a command with arguments ("python -m repdyn")
timeout --signal=TERM --kill-after=10 "$piece" $repdyn run "$experiment" --scale "$scale" --device "$device" \
    --out "$store/$experiment" --checkpoint-every "$checkpoint" --quiet
status=$?
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    echo "piece over during $experiment: call again to resume from $store"
    exit 3
fi
# 0: every claim as recorded; 1: some claim not as recorded (a result, not an error)
if [ "$status" -gt 1 ] || [ ! -f "$store/$experiment/claims.json" ]; then
    echo "$experiment failed with status $status"
    exit $((status > 1 ? status : 2))
fi
mkdir -p "$results/$experiment"
: > "$results/left_out.txt"
(cd "$store/$experiment" && find . -type f ! -name '*.ckpt' ! -name '.tmp-*' -print0) |
    while IFS= read -r -d '' file; do
        size=$(stat -c %s "$store/$experiment/$file")
        if [ "$size" -gt "$limit" ]; then
            echo "$experiment/$file $size bytes" >> "$results/left_out.txt"
            continue
        fi
        mkdir -p "$results/$experiment/$(dirname "$file")"
        cp "$store/$experiment/$file" "$results/$experiment/$file"
    done
echo "done: results in $results ($(wc -l < "$results/left_out.txt") stored runs over 16 MiB left in $store)"
