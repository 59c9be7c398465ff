"""A frozen biLM run once over a task's examples, so that the head trains without it (`elmo_hidden_states`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .collator import CHARACTER_KEYS, CHARACTERS, LABEL_KEYS, ElmoDataCollator, example_label, is_sentence_label


@torch.no_grad()
def precompute_elmo_layers(
    elmo, collator: ElmoDataCollator, examples: Sequence[dict], batch_size: int = 64, keep_input_ids: bool = False
) -> list[dict]:
    """Run a (frozen) biLM once over `examples` and return them with `"elmo_hidden_states"` instead of words.

    Each returned example holds a `(num_lstm_layers + 1, words, 2P)` float tensor (the words as the
    collator cuts them with `max_words`; labels are cut alike) and its `"labels"`. Heads take these
    through `elmo_hidden_states` and then give the same outputs as from the words, without the biLM.
    Memory: (L + 1) * 2P floats per word, e.g. 3 KB per word for `elmo-zh-small`.
    With `keep_input_ids` the words' character ids stay too (`"input_ids"`, and `"word_ids"` for models with
    a word embedding; for heads with their own word vectors, `config.task_token_features`).
    """
    was_training = elmo.training
    elmo.eval()
    device = next(elmo.parameters()).device
    lengths = [len(example["words"]) if "words" in example else 0 for example in examples]
    order = sorted(range(len(examples)), key=lambda i: lengths[i])  # fewer padded positions per batch
    results: list[dict | None] = [None] * len(examples)
    # The biLM reads the words only: labels and what each character carries are copied over below, not collated.
    not_for_the_bilm = {*LABEL_KEYS, *CHARACTER_KEYS}
    words_collator = ElmoDataCollator(collator.tokenizer, max_words=collator.max_words)
    words_collator._cache = collator._cache  # the character ids of words already read
    try:
        for begin in range(0, len(order), batch_size):
            chunk = order[begin : begin + batch_size]
            batch = words_collator([{key: value for key, value in examples[i].items() if key not in not_for_the_bilm}
                              for i in chunk])
            word_ids = batch.get("word_ids")
            outputs = elmo(
                batch["input_ids"].to(device),
                attention_mask=batch["attention_mask"].to(device),
                word_ids=None if word_ids is None else word_ids.to(device),
            )
            layers = torch.stack(outputs.hidden_states, dim=1).cpu()  # (B, L + 1, W, 2P)
            for row, index in enumerate(chunk):
                count = int(batch["attention_mask"][row].sum())
                item = {"elmo_hidden_states": layers[row, :, :count].clone()}
                if keep_input_ids:
                    item["input_ids"] = batch["input_ids"][row, :count].clone()
                    if word_ids is not None:
                        item["word_ids"] = word_ids[row, :count].clone()
                labels = example_label(examples[index])
                if "token_word_index" in examples[index]:  # characters of words: labels stay one per character
                    item["token_word_index"] = [i if i < count else -1 for i in examples[index]["token_word_index"]]
                    item["token_positions"] = list(examples[index]["token_positions"])
                    if CHARACTERS in examples[index]:
                        item[CHARACTERS] = list(examples[index][CHARACTERS])
                    item["labels"] = None if labels is None else list(labels)
                elif labels is not None:
                    item["labels"] = labels if is_sentence_label(labels) else list(labels)[:count]
                results[index] = item
    finally:
        elmo.train(was_training)
    return results


__all__ = ["precompute_elmo_layers"]
