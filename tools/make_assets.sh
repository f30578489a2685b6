#!/usr/bin/env bash
# The exact commands that trained the shipped checkpoints in assets/ (run from the repository root).
# The text: TINYSTORIES_DIR (default data/tinystories, the path the shipped files record in their
# training command) holds two samples of TinyStories (see README, "Train a checkpoint", for where
# the dataset is): train-sample-lowercase.txt, the first 5,478 stories of the train split, each
# lowercased, stories separated by newlines and paragraphs by blank lines; valid-sample.txt, the
# first 1,000 stories of the validation split, each followed by a line <|endoftext|>.
# Logs go to /tmp/train-NAME.log. Retrain only when the recipe changes.
#
# On the shared 2-core machine (other work running too) the three ran at once, one thread each:
# a two-thread run slowed to about 3,300 tokens/s while other work held a core.
set -euo pipefail
cd "$(dirname "$0")/.."
D="${TINYSTORIES_DIR:-data/tinystories}"
for f in "$D/train-sample-lowercase.txt" "$D/valid-sample.txt"; do
    [[ -f "$f" ]] || { echo "make_assets.sh: $f is missing (set TINYSTORIES_DIR; see the header)" >&2; exit 2; }
done
COMMON=(--corpus "$D/train-sample-lowercase.txt" --val "$D/valid-sample.txt"
        --context-length 32 --d-model 128 --d-mlp 512 --batch-size 64 --lr 2e-3
        --weight-decay 0.1 --seed 0 --eval-every 500)
mkdir -p assets
rm -rf assets/snapshots

# The app's default: 1 block, 1 head, learned positional encoding; 14 float16 snapshots.
OMP_NUM_THREADS=1 nice -n 5 python -m model.train "${COMMON[@]}" --n-layers 1 --n-heads 1 \
    --steps 2000 --snapshots 14 --snapshot-dir assets/snapshots \
    --out assets/tinystories-1L1H.safetensors 2> /tmp/train-1L1H.log &
# Its twin without positional encoding.
OMP_NUM_THREADS=1 nice -n 5 python -m model.train "${COMMON[@]}" --n-layers 1 --n-heads 1 \
    --steps 2000 --no-positional-encoding \
    --out assets/tinystories-1L1H-nope.safetensors 2> /tmp/train-1L1H-nope.log &
# A larger model for the multi-layer, multi-head views.
OMP_NUM_THREADS=1 nice -n 5 python -m model.train "${COMMON[@]}" --n-layers 4 --n-heads 4 \
    --steps 1200 --eval-every 400 \
    --out assets/tinystories-4L4H.safetensors 2> /tmp/train-4L4H.log &
wait

# The 4L4H had seen 2.6 epochs; 800 more steps from its weights at a lower learning rate
# (a fresh AdamW state and a short cosine), overwriting the file atomically.
OMP_NUM_THREADS=1 nice -n 5 python -m model.train "${COMMON[@]}" --resume assets/tinystories-4L4H.safetensors \
    --steps 800 --lr 6e-4 --min-lr 1e-4 --warmup 20 --eval-every 400 \
    --out assets/tinystories-4L4H.safetensors 2> /tmp/train-4L4H-resume.log
