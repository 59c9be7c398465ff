"""The modelling files every saved or pushed folder carries for `trust_remote_code=True`."""

# Every modelling file a saved folder carries: the three transformers looks for and what they import.
CODE_FILES = (
    "configuration_elmo.py", "modeling_elmo.py", "tokenization_elmo.py",
    "elmo_char_encoder.py", "elmo_crf.py", "elmo_losses.py", "elmo_lstm.py", "elmo_lstm_kernels.py",
    "elmo_scalar_mix.py", "elmo_token_cache.py", "field_types.py", "module_caches.py", "quantization.py",
    "weight_checksums.py", "elmo_word_characters.py", "elmo_sampled_softmax.py", "matrix_products.py", "elmo_text.py",
)
