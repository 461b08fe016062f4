"""The suite's version, written in one place: the build reads it from here, and every
record that names the suite (results, trees, bundles, reports) takes it from here."""

__version__ = "0.1.0"
