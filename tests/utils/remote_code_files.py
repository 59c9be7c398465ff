"""The modelling files every saved or pushed folder carries for `trust_remote_code=True`."""

# What a saved encoder with its tokenizer carries: the three files transformers looks for and what they import.
CODE_FILES = ("configuration_elmo.py", "modeling_elmo.py", "tokenization_elmo.py", "elmo_text.py")
# A character tagger carries its own module too.
CHARACTER_TAGGER_FILE = "modeling_elmo_character_tagging.py"
# Issue 34's bound on the remote code: few files, short enough to read.
MAX_CODE_FILES, MAX_CODE_LINES = 5, 2300
