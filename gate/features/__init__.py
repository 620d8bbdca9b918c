"""Disclosure classes: features of records and their rarity (METHODS §1)."""
