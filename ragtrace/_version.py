"""The SDK version, in one place (``ragtrace.__version__`` re-exports it)."""

VERSION = "0.1.0"
