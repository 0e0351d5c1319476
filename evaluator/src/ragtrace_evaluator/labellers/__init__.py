"""Labellers: the protocols, the registry that finds them by name, and the implementations."""
