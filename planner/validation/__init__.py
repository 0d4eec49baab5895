"""Validation: the predicted step as a trace, and (as it lands) probe comparisons."""
