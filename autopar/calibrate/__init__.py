"""`autopar calibrate`: torch-native runs of a plan on this node, held against the cost model."""
