"""Kernels grouped by what they serve; one op per module."""
