"""Mid-stream recovery, sans-I/O, as far as it knows no format: when a run failed, whether and when to
run the app again, what the re-run is told, and how its request asks for a continuation.

:mod:`.attempts` holds the one object the shell drives (:class:`Recoverer`), which reads and splices a
stream through its format's recovery: the class the format's dialect class names (``Dialect.recovery``,
in :mod:`..dialects.recovery`, beside the format's reading), found by the format's name; no table of
formats is kept here. :mod:`.prefill` rewrites a request body to ask for a continuation (in the shape
the format's recovery class says), with :mod:`.anchor`'s anchor and seam; :mod:`.value` is what the app
is told; :mod:`.run` is the state of one run of the app (one writer); :mod:`.raised` reads an
exception's status and Retry-After.
"""

from ..dialects.recovery.common import Failure, Reason
from ..dialects.recovery.request import Prefilled
from .attempts import GiveUp, Recoverer, Retry, Whole
from .prefill import prefill
from .value import SCOPE_KEY, Recovery, recovery

__all__ = [
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
