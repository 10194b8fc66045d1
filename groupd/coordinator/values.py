"""The decorator of the coordinator's value types (requests, answers, records): slotted dataclasses,
equal and hashed by their fields, never changed once made.

They are not ``frozen`` dataclasses because a frozen constructor sets each field through
object.__setattr__ (1.6 against 0.3 us for six fields), and a request makes several of them. Written
as a ``dataclass_transform`` so that type checkers see the fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar, dataclass_transform

_T = TypeVar("_T")


@dataclass_transform(eq_default=True)
def value(cls: type[_T]) -> type[_T]:
    return dataclass(slots=True, unsafe_hash=True)(cls)
