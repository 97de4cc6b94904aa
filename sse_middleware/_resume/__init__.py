"""Resumable streams, the stores: where logs live (memory or Redis), and the producer's log."""
