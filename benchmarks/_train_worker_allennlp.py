"""AllenNLP's side of `bench_training.py`: forward + backward through `allennlp.modules.elmo_lstm.ElmoLstm`,
the per-step Python loop of small matrix products (one `LstmCellWithProjection` per direction and layer).

    /path/to/venv-allennlp/bin/python _train_worker_allennlp.py SPEC.json RESULT.json

SPEC: {"weights": "weights.hdf5", "inputs": "inputs.npy", "lengths": "lengths.npy", "cell_dim", "projection_dim",
       "layers", "cell_clip", "proj_clip", "threads", "warmup", "repeats", "outputs": "first_outputs.npy"}

Runs in the AllenNLP virtualenv, so it imports only numpy, torch, allennlp and `_bench_worker` beside it
(which itself imports only numpy and torch at module level).
"""

from __future__ import annotations

import json
import statistics
import sys

import numpy as np
import torch

from _bench_worker import time_runs  # beside this script: numpy and torch only at module level


def main(spec_path: str, result_path: str) -> int:
    with open(spec_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    torch.set_num_threads(spec["threads"])
    from allennlp.modules.elmo_lstm import ElmoLstm

    lstm = ElmoLstm(
        input_size=spec["projection_dim"], hidden_size=spec["projection_dim"], cell_size=spec["cell_dim"],
        num_layers=spec["layers"], requires_grad=True,
        memory_cell_clip_value=spec["cell_clip"], state_projection_clip_value=spec["proj_clip"],
    )
    lstm.load_weights(spec["weights"])
    lstm.train()
    inputs = torch.from_numpy(np.load(spec["inputs"]))
    lengths = torch.from_numpy(np.load(spec["lengths"]))
    mask = torch.arange(inputs.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)

    with torch.no_grad():  # zero state: the layers to compare with ours
        first = lstm(inputs, mask)
    np.save(spec["outputs"], first.numpy())

    def step():
        lstm.reset_states()  # ElmoLstm carries state between batches; every timed batch starts from zero
        lstm.zero_grad(set_to_none=True)
        leaf = inputs.clone().requires_grad_()
        layers = lstm(leaf, mask)
        sum(layer.square().mean() for layer in layers).backward()

    times = time_runs(step, spec["warmup"], spec["repeats"])
    with open(result_path, "w", encoding="utf-8") as handle:
        json.dump({"median_s": statistics.median(times), "min_s": min(times), "times": times}, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
