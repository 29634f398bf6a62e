"""The examples in the package docstrings run and print what they show."""
import doctest

import pytest

import kvstore
import kvstore.nd
import kvstore.optimizer


@pytest.mark.parametrize("module", [kvstore, kvstore.nd, kvstore.optimizer],
                         ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
