"""Each format's mid-stream recovery, beside its reading: one module per format (:mod:`.openai_chat`,
:mod:`.anthropic`, :mod:`.openai_responses`, :mod:`.ai_sdk`), each a :class:`~.base.Transcript` (what
the client has, its request's shape for a re-run that asks for a continuation) and its
:class:`~.base.Splicer` (a re-run made into the continuation), which the format's dialect class names
(``Dialect.recovery``). What the formats share is here too, below the dialects: :mod:`.base` (the two
halves' interface), :mod:`.common` (an event read, a failure, the text matcher, usage), :mod:`.request`
(the request rewrite). What runs them, and knows no format, is :mod:`sse_middleware._core.recovery`.
"""
