"""The sans-I/O core: bytes and a clock in, frames and decisions out.

Nothing here awaits, imports an event loop, or knows about ASGI messages: the SSE codec, stream detection,
the dialects, the markdown- and grapheme-aware coalescer, the per-stream pipeline, deadlines and the
lifecycle table. That is what makes the hard parts testable with a fake clock and hypothesis.
"""
