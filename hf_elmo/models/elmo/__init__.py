"""ELMo: the files every saved or pushed folder carries as Hub remote code, read top-down in the order text flows
(`text_elmo` -> `tokenization_elmo` -> `configuration_elmo` -> `bilm_elmo` -> `modeling_elmo`). They import only
torch, transformers, tokenizers, jieba and each other, never the hf_elmo package."""
