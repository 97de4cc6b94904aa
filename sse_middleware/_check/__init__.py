"""``python -m sse_middleware check URL``: stream from a URL as a client would and say whether it streamed.

Sans-I/O, like the core: :mod:`.recorder` turns timed reads into a :class:`~.recorder.Timeline`,
:mod:`.measure` and :mod:`.diagnose` read numbers and problems from it, :mod:`.report` renders them;
:mod:`.protocol` is the one place that knows stream formats. Only :mod:`.fetch` does I/O (``http.client``
from the standard library), and :mod:`.cli` parses the command line.
"""
