"""Mid-stream recovery, sans-I/O: what triggers it, what the client has, and the splice of a re-run.

:mod:`.attempts` holds the one object the shell drives (:class:`Recoverer`); one module per format reads
that format's events (:mod:`.chat`, :mod:`.anthropic`, :mod:`.responses`, :mod:`.ui`); :mod:`.prefill`
rewrites a request body to ask for a continuation; :mod:`.value` is what the app is told; :mod:`.run` is
the state of one run of the app (one writer); :mod:`.raised` reads an exception's status and Retry-After.
"""

from .attempts import FORMATS, GiveUp, Recoverer, Retry, Whole
from .common import Failure
from .prefill import Prefilled, prefill
from .value import SCOPE_KEY, Reason, Recovery, recovery

__all__ = [
    "FORMATS",
    "SCOPE_KEY",
    "Failure",
    "GiveUp",
    "Prefilled",
    "Reason",
    "Recoverer",
    "Recovery",
    "Retry",
    "Whole",
    "prefill",
    "recovery",
]
