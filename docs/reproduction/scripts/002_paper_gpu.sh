#!/usr/bin/env bash
# Seed 002 (Leaky ResNets) at the paper scale on one GPU, in pieces: each call runs for at most PIECE seconds
# (default 470, under 8 minutes) and then stops; the next call resumes from the checkpoints in STORE (the runs'
# training loops checkpoint every CHECKPOINT minutes). Run it until it exits 0.
#
#   docs/reproduction/scripts/002_paper_gpu.sh STORE RESULTS [SCALE] [DEVICE] [PIECE] [CHECKPOINT]
#
# STORE: the run store (keep it between calls; it holds the checkpoints). RESULTS: where the finished runs, claims
# and report are copied, without checkpoints (every file checked to be at most 16 MiB). SCALE defaults to paper,
# DEVICE to cuda. Exit status: 0 every experiment finished and copied; 3 the piece's time ran out (call again);
# anything else: an error. The experiments: leaky_resnet.structures, then leaky_resnet.discretisation.
set -u
store=${1:?usage: 002_paper_gpu.sh STORE RESULTS [SCALE] [DEVICE] [PIECE] [CHECKPOINT]}
results=${2:?usage: 002_paper_gpu.sh STORE RESULTS [SCALE] [DEVICE] [PIECE] [CHECKPOINT]}
scale=${3:-paper}
device=${4:-cuda}
piece=${5:-470}
checkpoint=${6:-0.5}
repdyn=${REPDYN:-repdyn}
limit=$((16 * 1024 * 1024))
end=$((SECONDS + piece))
for experiment in leaky_resnet.structures leaky_resnet.discretisation; do
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
    mkdir -p "$results/$experiment"
    (cd "$store/$experiment" && find . -type f ! -name '*.ckpt' ! -name '.tmp-*' -print0) |
        while IFS= read -r -d '' file; do
            mkdir -p "$results/$experiment/$(dirname "$file")"
            cp "$store/$experiment/$file" "$results/$experiment/$file"
        done
done
too_big=$(find "$results" -type f -size +"$limit"c)
if [ -n "$too_big" ]; then
    echo "files over 16 MiB: $too_big"
    exit 4
fi
echo "done: results in $results"
