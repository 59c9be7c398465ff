#!/usr/bin/env bash
# Rebuilds hf_elmo/pretrained/elmo-zh-small from scratch: corpus -> vocabulary -> pretraining -> export.
# Needs `pip install -e ".[train,data]"`. About 3 hours of training on 1 CPU core in all: stage 1 stops after 1,100
# steps or 85 minutes, stage 2 after 100 minutes (the shipped model: 81 + 96 minutes).
# The shipped model was trained before batches were grouped by length, hence --no-group-by-length.
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=${WORK:-work_dirs/elmo-zh-small}
mkdir -p "$WORK"
python -m hf_elmo.zh_corpora --output "$WORK/corpus"
python - "$WORK" <<'PY'
import sys
from hf_elmo.lm_data import build_vocabulary, save_vocabulary
work = sys.argv[1]
save_vocabulary(build_vocabulary([f"{work}/corpus/train.txt"], min_count=5), f"{work}/corpus/vocab.txt")
PY
head -1000 "$WORK/corpus/dev.txt" > "$WORK/corpus/dev1000.txt"
python -c "
from hf_elmo.zh_corpora import split_peoples_daily
test = split_peoples_daily()['test'][:1000]
open('$WORK/corpus/test1000.txt', 'w', encoding='utf-8').write(''.join(' '.join(w) + '\n' for w, _ in test))"
MODEL_ARGS=(--projection-dim 128 --cell-dim 512 --layers 2 --char-dim 16
  --filters '[[1,32],[2,32],[3,64],[4,128],[5,256]]' --highway 1 --softmax sampled --num-sampled 2048 --dropout 0.1)
DATA_ARGS=(--train-file "$WORK/corpus/train.txt" --dev-file "$WORK/corpus/dev1000.txt" --vocab "$WORK/corpus/vocab.txt")
# Stage 1: 1,100 steps from scratch (lr 2e-3).
OMP_NUM_THREADS=1 python -m hf_elmo.pretrain "${DATA_ARGS[@]}" "${MODEL_ARGS[@]}" --output-dir "$WORK/run" \
  --batch-size 64 --lr 2e-3 --max-steps 1100 --warmup-ratio 0.03 --eval-steps 250 \
  --save-steps 100 --save-total-limit 2 --logging-steps 20 --threads 1 --no-group-by-length --time-budget-minutes 85 --seed 42
# Stage 2: 3,600 more steps from stage 1's encoder (as shipped: no softmax, so the softmax starts fresh),
# with a fresh schedule (lr 1.5e-3) and another data order. This is how the shipped model was made: stage 2
# started from the elmo-zh-small of stage 1 (`--init-from default` when that model is the shipped one).
python -c "from hf_elmo import ElmoModel; m = ElmoModel.from_pretrained('$WORK/run'); m.config.lm_vocab = None; m.save_pretrained('$WORK/stage1-encoder')"
cp "$WORK/run/pretraining_summary.json" "$WORK/stage1-encoder/"  # the exporter lists every stage
OMP_NUM_THREADS=1 python -m hf_elmo.pretrain "${DATA_ARGS[@]}" "${MODEL_ARGS[@]}" --output-dir "$WORK/run2" \
  --init-from "$WORK/stage1-encoder" --batch-size 64 --lr 1.5e-3 --max-steps 3600 --warmup-ratio 0.03 --eval-steps 900 \
  --save-steps 100 --save-total-limit 2 --logging-steps 50 --threads 1 --no-group-by-length --time-budget-minutes 100 --seed 43
python examples/elmo_zh_small/export_default.py --run "$WORK/run2" --corpus "$WORK/corpus" \
  --output hf_elmo/pretrained/elmo-zh-small --overwrite
