"""Exit codes: one meaning each, whatever the command (README)."""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    # The command could not do its work: an input could not be read at all, a server could not
    # bind its address, a token name is taken.
    UNREADABLE = 1
    FAILED = 1
    USAGE = 2  # click's own code for bad usage
    STRICT = 3  # a corrupt unit under --strict
    STORE = 4  # the store cannot be opened or reached
    NOT_FOUND = 5  # a named fact or token does not exist
    INVALID_ROW = 6  # an exported row failed its schema: a defect in lithify, nothing written
    DIFFERS = 7  # export --replay made other bytes, or the folder no longer holds its export
