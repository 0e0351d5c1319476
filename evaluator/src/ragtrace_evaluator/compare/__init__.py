"""Release comparison: paired statistics, decomposition, movers, gates and the HTML report."""
