"""Tools for developing and trying SLM Lab without accounts or cloud machines."""
