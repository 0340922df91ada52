"""Use cases: load the inputs, call the search or the cost model, return frozen results."""
