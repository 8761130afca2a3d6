#!/usr/bin/env bash
# Experiments at the paper scale on one GPU, in pieces: each call runs for at most PIECE seconds (default 470, under
# 8 minutes) and then stops; the next call resumes from the checkpoints in STORE (the training loops checkpoint every
# CHECKPOINT minutes). Run it until it exits 0.
#
#   docs/reproduction/scripts/paper_gpu.sh STORE RESULTS EXPERIMENT [EXPERIMENT ...]
#
# Seed 002: leaky_resnet.structures leaky_resnet.discretisation (CHECKPOINT=0.5); seed 004: elastic_sde.geomnist
# (3 replicates × 100 LeNets × 10⁵ iterations in float64, Fig. D.3's n_tr sweep and the untrained control).
# STORE: the run store (keep it between calls; it holds the checkpoints). RESULTS: where each finished experiment's
# claims, report, metrics, figures and runs are copied, without checkpoints; a file over RESULTS_LIMIT bytes (default
# 16 MiB, e.g. a GeoMNIST run's logits) stays in STORE and is named in RESULTS/left_out.txt with its size.
# Environment: SCALE (default paper), DEVICE (cuda), PIECE (470), CHECKPOINT (minutes, 2), REPDYN (the command,
# default repdyn). Exit status: 0 every experiment finished and copied; 3 the piece's time ran out (call again);
# anything else: an error.
set -u
usage="usage: paper_gpu.sh STORE RESULTS EXPERIMENT [EXPERIMENT ...]"
store=${1:?$usage}
results=${2:?$usage}
shift 2
[ "$#" -gt 0 ] || { echo "$usage"; exit 2; }
scale=${SCALE:-paper}
device=${DEVICE:-cuda}
piece=${PIECE:-470}
checkpoint=${CHECKPOINT:-2}
repdyn=${REPDYN:-repdyn}
limit=${RESULTS_LIMIT:-$((16 * 1024 * 1024))}
end=$((SECONDS + piece))
mkdir -p "$results"
: > "$results/left_out.txt"
for experiment in "$@"; do
    left=$((end - SECONDS))
    if [ "$left" -le 0 ]; then
        echo "piece over before $experiment: call again to resume"
        exit 3
    fi
    # shellcheck disable=SC2086  # REPDYN may be a command with arguments ("python -m repdyn")
    timeout --signal=TERM --kill-after=10 "$left" $repdyn run "$experiment" --scale "$scale" --device "$device" \
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
done
echo "done: results in $results ($(wc -l < "$results/left_out.txt") files over the limit left in $store)"
