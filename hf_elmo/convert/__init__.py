"""Formats other than a transformers folder: bilm-tf / AllenNLP hdf5 (`bilm_hdf5`), ELMoForManyLangs
(`elmoformanylangs`), ONNX (`onnx`: the export and the client that runs it without torch)."""
