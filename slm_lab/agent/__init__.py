"""The agent: algorithms, memories and nets. Submodules import torch; this package does not, so
the torch-free config modules load without it."""
