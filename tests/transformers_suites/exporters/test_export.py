"""Stand-in for transformers' `tests/exporters/test_export.py`, which its source package does not ship.

`ModelTesterMixin` inherits `ExportTesterMixin`; the real one brings transformers' exporter tests, which need
the rest of transformers' `tests/exporters/` package. Here it adds nothing: ELMo's own export tests
(torch.export, ONNX) live in tests/export/ and tests/models/.
"""


class ExportTesterMixin:
    pass
