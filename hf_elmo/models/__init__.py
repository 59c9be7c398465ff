"""The model families of hf-elmo, laid out as transformers lays out its own (`models/<name>/`)."""
