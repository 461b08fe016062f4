"""``python -m suite.schemas``: regenerate the committed JSON schemas from the models."""

from suite.schemas import write

for path in write():
    print(path)
