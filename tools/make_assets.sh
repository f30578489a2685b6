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
rm -rf assets/snapshots assets/tinystories-2L4H-induction-snapshots

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

# The model before attention (python -m model.train --arch window-mlp: a fixed-window MLP over the last 32
# tokens, model/core/window.py): the default's text, steps and optimiser and its tokenizer (so after it),
# d_mlp 48 for about the default's parameter count (727,472 against 726,528). One thread, as the others.
OMP_NUM_THREADS=1 nice -n 5 python -m model.train --corpus "$D/train-sample-lowercase.txt" --val "$D/valid-sample.txt" \
    --context-length 32 --d-model 128 --batch-size 64 --lr 2e-3 --weight-decay 0.1 --seed 0 --eval-every 500 \
    --arch window-mlp --d-mlp 48 --tokenizer assets/tinystories-1L1H.safetensors --steps 2000 \
    --out assets/tinystories-window-mlp.safetensors 2> /tmp/train-window-mlp.log &

# The 4L4H had seen 2.6 epochs; 800 more steps from its weights at a lower learning rate
# (a fresh AdamW state and a short cosine), overwriting the file atomically.
OMP_NUM_THREADS=1 nice -n 5 python -m model.train "${COMMON[@]}" --resume assets/tinystories-4L4H.safetensors \
    --steps 800 --lr 6e-4 --min-lr 1e-4 --warmup 20 --eval-every 400 \
    --out assets/tinystories-4L4H.safetensors 2> /tmp/train-4L4H-resume.log
wait

# A 2-layer model in which an induction head forms (README, "Watching an induction head form"): RoPE,
# 4 heads of 16, a context of 64, the default model's tokenizer; in each batch half the blocks hold
# 8 to 32 random tokens repeated to the block's end (--repeat-share 0.5 --repeat-random). Trials on
# this machine formed no induction head (best induction score at most 0.06): natural text alone in
# 1,000 steps, its own first tokens repeated (shares 0.3 and 0.5) in 1,300, random segments
# repeated once at lr 3e-3 in 1,300 to 1,500 (with and without RoPE), and once at lr 1e-2 in 2,700;
# random tokens repeated to the end of a block at lr 1e-2 did (README, "Watching an induction head
# form"). A snapshot before the first step and every 100 steps, of which those around the phase
# change are kept (the others are deleted below): the checkpoint and its snapshots take 7.9 MB.
OMP_NUM_THREADS=1 nice -n 5 python -m model.train --corpus "$D/train-sample-lowercase.txt" --val "$D/valid-sample.txt" \
    --tokenizer assets/tinystories-1L1H.safetensors --context-length 64 --d-model 64 --d-mlp 256 --n-layers 2 \
    --n-heads 4 --rope --batch-size 32 --lr 1e-2 --weight-decay 0.1 --seed 0 --steps 3000 --eval-every 1000 \
    --repeat-share 0.5 --repeat-random --snapshot-steps 0 --snapshot-every 100 \
    --snapshot-dir assets/tinystories-2L4H-induction-snapshots --out assets/tinystories-2L4H-induction.safetensors \
    --quiet 2> /tmp/train-2L4H-induction.log
KEEP=(0 500 1000 1100 1200 1300 1400 3000)  # the phase change is between steps 1,100 and 1,300
for f in assets/tinystories-2L4H-induction-snapshots/step-*.safetensors; do
    step=$((10#$(basename "$f" .safetensors | cut -d- -f2)))
    [[ " ${KEEP[*]} " == *" $step "* ]] || rm "$f"
done
