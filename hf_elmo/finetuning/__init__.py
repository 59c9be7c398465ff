"""Training task heads on a pretrained biLM: the options (`options`), the data (`conll`, `character_words`,
`collator`, `precomputed_layers`), the run on transformers' `Trainer` (`run`), tagging and its scores (`predict`,
`metrics`)."""
