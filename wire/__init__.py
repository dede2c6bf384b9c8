"""Boreas."""
