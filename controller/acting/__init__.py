"""Carrying a pass's actions out through the API (`executor`)."""
