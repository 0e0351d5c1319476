"""One module per group of `ragtrace` subcommands; each entry point takes argv and returns an exit code."""
