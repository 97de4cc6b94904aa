"""What the sans-I/O core is told: plain values, built by the settings (``StreamingSettings.core``).

The core never sees the settings class itself, so it can be driven (and tested) with nothing but this.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .dialects.detect import DialectName


@dataclasses.dataclass(frozen=True, slots=True)
class CoreConfig:
    dialect: DialectName = "auto"
    json_text_field: str = "text"
    coalesce: bool = True
    coalesce_max_delay: float = 0.05
    coalesce_max_bytes: int = 4096
    max_event_bytes: int = 1 << 20
    heartbeat_interval: float = 15.0
    stall_timeout: float = 0.0
