#!/usr/bin/env bash
# Rebuilds hf_elmo/pretrained/elmo-zh-small from scratch: corpus -> vocabulary -> pretraining -> export.
# Needs `pip install -e ".[train,data]"`. About 85 minutes of training on 2 CPU cores.
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
OMP_NUM_THREADS=1 python -m hf_elmo.pretrain \
  --train-file "$WORK/corpus/train.txt" --dev-file "$WORK/corpus/dev1000.txt" --vocab "$WORK/corpus/vocab.txt" \
  --output-dir "$WORK/run" --projection-dim 128 --cell-dim 512 --layers 2 --char-dim 16 \
  --filters '[[1,32],[2,32],[3,64],[4,128],[5,256]]' --highway 1 --softmax sampled --num-sampled 2048 \
  --dropout 0.1 --batch-size 64 --lr 2e-3 --max-steps 1100 --warmup-ratio 0.03 --eval-steps 250 \
  --save-steps 100 --save-total-limit 2 --logging-steps 20 --threads 1 --time-budget-minutes 85 --seed 42
python examples/elmo_zh_small/export_default.py --run "$WORK/run" --corpus "$WORK/corpus" \
  --output hf_elmo/pretrained/elmo-zh-small --overwrite
