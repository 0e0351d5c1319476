"""The composition root: the one `ragtrace` command and the `ragtrace serve` process, assembled
from the layers below (store, ingest, evaluator, review). Nothing below imports this package."""
