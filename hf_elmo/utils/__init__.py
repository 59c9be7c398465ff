"""What every command that writes shares: atomic writes and the one lock (`io`), which checkpoint a run resumes from
(`checkpoints`), saving on Ctrl-C (`interruption`), model cards (`model_card`), transformers versions
(`transformers_versions`)."""
