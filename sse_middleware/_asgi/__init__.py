"""The ASGI shell: the only part that does I/O. It feeds the sans-I/O core (:mod:`sse_middleware._core`)
and writes what comes back.

- :mod:`.middleware`: ``StreamingMiddleware``, frozen settings, one responder per request, the shutdown
  drain, and the refusal of a bad setting at the lifespan's startup; :mod:`.shutdown`, the SIGTERM/SIGINT
  chain that starts the drain.
- :mod:`.responder`: one request: the app runs in the server's task, its ``receive`` as the server's,
  pass-through, and the start; :mod:`.start`, the factory that builds a finished stream at the start.
- :mod:`.stream`: one streaming response as the middleware ends it and the AI SDK's chat index; it owns
  the parts below. :mod:`.stream_end`: the ending policy, why the middleware ends a stream and what the
  client is told (an error, a timeout, a reconnect hint, the end on delete).
- :mod:`.writer`: the client side, the only caller of the server's ``send`` for a stream: the per-token
  path, frames, heartbeats and the one cuttable write; :mod:`.write_lock`, the lock around ``send`` and
  the state the parts share; :mod:`.writer_watch`, what the watcher asks of it; :mod:`.last_write`, the
  stream's last writes (the ending, the final body).
- :mod:`.stream_timers`: what the stream does at each deadline; :mod:`.watcher`, the one timer handle
  (and helper task) per stream that wakes it.
- :mod:`.guards`: guards run beside the app, one check task per stream.
- :mod:`.recovery`: a recovered stream's runs (each run's bodies through the splice, the re-run's scope
  and replayed body, giving up); :mod:`.recovery_plan`, what a stream's recovery is made from at its
  start. :mod:`.stages`: the rule that composes a stream's per-stage wrappers (recovery, guards) in
  front of the writer.
- :mod:`.disconnect`: seeing a client leave without changing the app's ``receive``, and the stream's
  disconnect listener.
- :mod:`.resume`, :mod:`.chat_resume`: answering a ``Last-Event-ID`` or the AI SDK's
  ``GET .../{chatId}/stream`` (and its ``DELETE``) from the log, without the app; :mod:`.takeover`, a
  dead producer's stream (its lease run out) claimed by one host and run again onto the same log, or
  ended with the format's error.
- :mod:`.backend`: the asyncio/trio look-ups anyio does not offer cheaply.
"""
