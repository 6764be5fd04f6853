"""Timing model: cycle-approximate scheduling of a program record. Knows nothing about values."""
