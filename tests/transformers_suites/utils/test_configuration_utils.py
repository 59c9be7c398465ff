"""Stand-in for the part of transformers' `tests/utils/test_configuration_utils.py` that
`test_configuration_common.py` imports (the source package does not ship it).

`config_common_kwargs`: every keyword that transformers' `PreTrainedConfig` itself takes (its dataclass fields, and
the keywords its `__post_init__` reads), each with a value that is *not* the default, so that `ConfigTester`'s
`check_config_arguments_init` shows that a model's config passes every one of them on to `PreTrainedConfig`.
"""

config_common_kwargs = {
    # PreTrainedConfig's fields (defaults: None, None, False, True, None, 0, False, None, None, None).
    "transformers_version": "0.0.1",
    "architectures": ["BertModel"],
    "output_hidden_states": True,
    "return_dict": False,
    "dtype": "float16",  # stored as torch.float16; the test compares it so
    "chunk_size_feed_forward": 5,
    "is_encoder_decoder": True,
    "id2label": {0: "label"},
    "label2id": {"label": "0"},
    "problem_type": "regression",
    # Keywords __post_init__ turns into properties (defaults: False, "").
    "output_attentions": True,
    "name_or_path": "my-model",
}
