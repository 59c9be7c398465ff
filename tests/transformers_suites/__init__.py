"""transformers' own common test suites, run on hf-elmo.

This package stands where transformers' `tests/` folder stands in its repository, so that the test files keep
transformers' relative imports (`models/elmo/test_modeling_elmo.py` does `from ...test_modeling_common import
ModelTesterMixin`, as `tests/models/bert/test_modeling_bert.py` does). Two folders make it up:

- this one (in git): the ELMo test files under `models/elmo/`, and small stand-ins for the modules the common files
  import but transformers' source package does not ship (`generation/`, `exporters/`, `utils/`, `fixtures/`);
- `.fetched/transformers-<version>/tests/` (ignored by git): the top-level `tests/*.py` of the installed
  transformers version's source package, fetched from the package index by `conftest.py` and appended to this
  package's `__path__`, so that `transformers_suites.test_modeling_common` is transformers' own file.
"""
