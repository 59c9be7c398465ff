"""Are this checkout's outputs bit-identical to another commit's on this machine? (Refactors must not move numbers.)

    python benchmarks/bit_identity.py --old 86ee0a7

Checks the other commit out in a temporary git worktree, runs the same script under both `hf_elmo` packages in
fresh processes (1 thread): a random tiny `ElmoModel` (seeded), both task heads built on it (seeded, so weight
initialisation order counts too), and the shipped elmo-zh-small of the *old* checkout, on a few sentences; then
compares the float32 outputs byte for byte. Prints one line per output and exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

RUN = r'''
import sys, numpy as np, torch
sys.path.insert(0, sys.argv[1])
from hf_elmo import ElmoConfig, ElmoModel, ElmoTokenizer, ElmoForTokenClassification, ElmoForSequenceClassification
torch.set_num_threads(1)
tiny = dict(char_embedding_dim=8, char_cnn_filters=[[1, 32], [2, 32]], projection_dim=16, lstm_cell_dim=32,
            num_lstm_layers=2, cell_clip=3, proj_clip=3)
sentences = [["我", "喜欢", "吃", "小米"], ["小米", "手机", "挺", "好用", "的"], ["a"]]
batch = ElmoTokenizer(segmenter="whitespace")(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
out = {}
with torch.no_grad():
    torch.manual_seed(1)
    out["ElmoModel (tiny, random)"] = torch.stack(ElmoModel(ElmoConfig(**tiny)).eval()(**batch).hidden_states).numpy()
    torch.manual_seed(2)
    tagger = ElmoForTokenClassification(ElmoConfig(**tiny, num_labels=3, task_encoder="bilstm", use_crf=True))
    out["ElmoForTokenClassification (bilstm + CRF)"] = tagger.eval()(**batch).logits.numpy()
    torch.manual_seed(2)
    classifier = ElmoForSequenceClassification(ElmoConfig(**tiny, num_labels=3))
    out["ElmoForSequenceClassification"] = classifier.eval()(**batch).logits.numpy()
    shipped = ElmoModel.from_pretrained(sys.argv[3]).eval()
    shipped_batch = ElmoTokenizer.from_pretrained(sys.argv[3])(sentences, is_split_into_words=True, padding=True,
                                                               return_tensors="pt")
    out["shipped elmo-zh-small of the old commit"] = torch.stack(shipped(**shipped_batch).hidden_states).numpy()
np.savez(sys.argv[2], **out)
'''


def outputs(package_root: Path, model: Path, work: Path, name: str) -> dict:
    path = work / f"{name}.npz"
    run = subprocess.run([sys.executable, "-c", RUN, str(package_root), str(path), str(model)], capture_output=True,
                         text=True, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}, cwd=work)
    if run.returncode != 0:
        raise SystemExit(f"the {name} checkout's run failed:\n{run.stderr[-3000:]}")
    data = np.load(path)
    return {key: data[key] for key in data.files}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", required=True, help="commit to compare with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bit-identity-") as work:
        work = Path(work)
        old = work / "old"
        subprocess.run(["git", "worktree", "add", "--detach", str(old), args.old], cwd=REPO, check=True,
                       capture_output=True)
        try:
            model = old / "hf_elmo" / "pretrained" / "elmo-zh-small"
            before, after = outputs(old, model, work, "old"), outputs(REPO, model, work, "new")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=REPO, capture_output=True)
    differ = 0
    for name, value in before.items():
        same = value.tobytes() == after[name].tobytes()
        differ += not same
        detail = "bit-identical" if same else f"differs: max |diff| {np.abs(value - after[name]).max():.3g}"
        print(f"{name} {tuple(value.shape)}: {detail}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
