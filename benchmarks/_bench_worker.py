"""One side of `bench_inference.py`, run in its own process so that peak RSS belongs to one side only.

    python _bench_worker.py SPEC.json RESULT.json

SPEC: {"side": "ours" | "allennlp", "mode": "fp32" | "reference" | "mkl" | "repack" | "cache" | "bf16" | "int8",
       "options": ..., "weights": ..., "folder": ..., "sentences": [[word, ...], ...],
       "vocabulary": [...], "threads": 2, "warmup": 1, "repeats": 5, "first_batch": "out.npy"}

This file imports only torch and numpy at module level (plus the side's own library), because the
AllenNLP side runs in a separate virtualenv with different transformers/tokenizers versions.
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time

import numpy as np
import torch


def peak_rss_mb() -> float:
    """Peak resident set of this process. VmHWM belongs to the process's own address space; getrusage's
    ru_maxrss would also carry the parent's peak over fork/exec."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def time_runs(run, warmup: int, repeats: int) -> list[float]:
    """Seconds of each of `repeats` calls of `run()`, after `warmup` untimed ones."""
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return times


def load_allennlp(spec):
    from allennlp.modules.elmo import Elmo, batch_to_ids
    from allennlp.nn.util import remove_sentence_boundaries

    start = time.perf_counter()
    elmo = Elmo(spec["options"], spec["weights"], num_output_representations=1, dropout=0.0, requires_grad=False)
    elmo.eval()
    load_seconds = time.perf_counter() - start
    char_ids = batch_to_ids(spec["sentences"])

    def all_layers():
        """All three layers, boundaries removed, from the model's current (fresh) state."""
        output = elmo._elmo_lstm(char_ids)
        layers = [remove_sentence_boundaries(a, output["mask"])[0] for a in output["activations"]]
        return np.stack([layer.numpy() for layer in layers])

    def run():
        return elmo(char_ids)["elmo_representations"][0]

    return load_seconds, all_layers, run


def implement(model, implementation: str) -> None:
    """The implementation choice, on this checkout's API or (for `--against` an older commit) the config field."""
    if hasattr(model, "set_lstm_implementation"):
        model.set_lstm_implementation(implementation)
    else:
        model.config.lstm_implementation = implementation


def load_ours(spec):
    import hf_elmo  # noqa: F401  (registers the Auto classes)
    from hf_elmo.models.elmo.modeling_elmo import ElmoModel
    from hf_elmo.models.elmo.tokenization_elmo import ElmoTokenizer

    start = time.perf_counter()
    model = ElmoModel.from_pretrained(spec["folder"])
    model.eval()
    load_seconds = time.perf_counter() - start
    mode = spec["mode"]
    extra = {}
    tokenizer = ElmoTokenizer(segmenter="whitespace")
    encoded = tokenizer(spec["sentences"], is_split_into_words=True, padding=True, return_tensors="pt")
    input_ids, attention_mask = encoded["input_ids"], encoded["attention_mask"]
    if mode in ("reference", "int8"):
        implement(model, mode)
    elif mode == "mkl":  # the fast path without oneDNN's packed products
        implement(model, "fast")
    elif mode == "repack":  # oneDNN with the packed weights made for each call only (less memory)
        from hf_elmo.kernels import set_keep_inference_copies

        set_keep_inference_copies(model, False)
    elif mode == "cache":
        from hf_elmo.kernels import build_token_cache

        start = time.perf_counter()
        words = torch.tensor([tokenizer.word_to_char_ids(w) for w in spec["vocabulary"]])
        extra["cache_tokens"] = build_token_cache(model, words)
        extra["cache_build_s"] = time.perf_counter() - start
    elif mode == "bf16":
        model = model.to(torch.bfloat16)

    def all_layers():
        output = model(input_ids, attention_mask=attention_mask)
        return np.stack([layer.float().numpy() for layer in output.hidden_states])

    def run():
        return model(input_ids, attention_mask=attention_mask).elmo_representations[0]

    return load_seconds, all_layers, run, extra


def main(spec_path: str, result_path: str) -> None:
    with open(spec_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    torch.set_num_threads(spec["threads"])
    torch.set_flush_denormal(True)  # random weights can produce denormals that slow both sides 10x
    extra = {}
    with torch.no_grad():
        if spec["side"] == "allennlp":
            load_seconds, all_layers, run = load_allennlp(spec)
        else:
            load_seconds, all_layers, run, extra = load_ours(spec)
        rss_after_load = peak_rss_mb()
        np.save(spec["first_batch"], all_layers())  # first batch from a fresh model (zero state)
        times = time_runs(run, spec["warmup"], spec["repeats"])
    result = {
        "load_s": load_seconds,
        "median_s": statistics.median(times),
        "times_s": times,
        "rss_after_load_mb": rss_after_load,
        "peak_rss_mb": peak_rss_mb(),
        "torch": torch.__version__,
        **extra,
    }
    with open(result_path, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
