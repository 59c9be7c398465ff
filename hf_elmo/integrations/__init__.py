"""hf-elmo in the tools users already work in: sentence-transformers (`integrations.sentence_transformers`).

Each integration needs its own optional package (an extra of hf-elmo) and is imported on its own, so that importing
hf-elmo never imports them.
"""
