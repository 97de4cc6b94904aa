"""Text that exercises cut rules: grapheme clusters complete by UAX #29, and simple atoms."""

from __future__ import annotations

FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # man ZWJ woman ZWJ girl
US, FR = "\U0001f1fa\U0001f1f8", "\U0001f1eb\U0001f1f7"  # regional-indicator pairs
SCOTLAND = "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"  # tag sequence
# Each is one extended grapheme cluster (UAX #29); none begins with a character that could attach to
# its left neighbour, none ends with one that waits for a follower.
CLUSTERS = [
    "e\u0301",  # combining acute
    "a\u0308\u0301",  # two combining marks
    "\U0001f44d\U0001f3fd",  # thumbs up + skin tone
    "\u2764\ufe0f",  # heart + VS16
    "1\ufe0f\u20e3",  # keycap
    "#\ufe0f\u20e3",
    FAMILY,
    "\U0001f469\u200d\u2764\ufe0f\u200d\U0001f468",  # couple with heart
    "\U0001f3f3\ufe0f\u200d\U0001f308",  # rainbow flag
    US,
    FR,
    SCOTLAND,
    "\u0915\u094d\u0937",  # Devanagari conjunct (GB9c)
    "\u0915\u093f",  # consonant + spacing vowel sign
    "\u0e01\u0e33",  # Thai SARA AM (SpacingMark)
    "\u0600\u0661",  # Prepend + digit
    "\u1100\u1161\u11a8",  # Hangul L V T
    "\u1100\u1161",  # Hangul L V
    "\uac01",  # precomposed LVT syllable
    "\r\n",
]
SIMPLE = [*"ab Z.\n\t\u4f60\u597d\u3002\uff01\uac00`*$|_~[]()!", ". ", "```", "**", "$$", "\U0001f44d"]
