"""Shared test settings: property tests check laws, not speed, so Hypothesis has no deadline
(timing belongs to benchmarks/, and a loaded CI machine must not make a law look broken)."""

from hypothesis import settings

settings.register_profile("simtc", deadline=None)
settings.load_profile("simtc")
