"""Disclosure classes: features of records and their rarity.

The pairs (features, rare) of *Phantoms and Disclosures: a Causal Framework for Auditing
Synthetic Data* (2026), §2 and §3.2; see docs/methods.md §1.
"""
