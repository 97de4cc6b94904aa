"""The ASGI shell: the only part that does I/O. The middleware, one responder per response, its timer,
the disconnect watch, the send gate and the shutdown signal chain. It feeds the sans-I/O core
(:mod:`sse_middleware._core`) and sends what comes back."""
