"""``python -m suite.schemas``: regenerate the committed JSON schemas from the models."""

from . import write

for path in write():
    print(path)
