"""Tagged fields that kio's schemas do not know, skipped as Kafka's readers skip them.

A flexible request may carry tagged fields its reader does not know: a client built against a newer
Kafka can send a tag added later to a version it shares with us. Kafka's generated readers keep such a
field aside (``_unknownTaggedFields``) and serve the request; kio's native reader raises
``KeyError('Unknown tagged field tag: N')``. So when kio refuses a request that way (and only then: the
common path is kio's read, untouched), the frame is walked whole by ``groupd/protocol/bounds``' walker, every
unknown tag is cut out of its section (the request header's, the body's, any nested struct's or array
element's), and kio reads the rewritten frame.

What Kafka's reader refuses is refused here too, with ``Unparseable`` (the connection is closed): an
unknown tag whose size runs past the end of the request (``readUnknownTaggedField``: "Error reading byte
array of N byte(s): only M byte(s) available"), a section that runs off the end, and a tag the struct
holds in other versions but not in this one ("Tag N is not valid for version V"). Order and repeats
are not checked, as Kafka does not check them.
"""

from __future__ import annotations

import functools
import importlib
import struct
from dataclasses import fields

from kio.schema.index import api_key_map, schema_name_map
from kio.serial._introspect import get_field_tag
from kio.static.constants import EntityType

from groupd.protocol import bounds


def strip(frame: bytes, header_class: type, body_class: type) -> bytes | None:
    """``frame`` (a request header of ``header_class`` followed by a body of ``body_class``) without
    the tagged fields kio does not know, or None when there are none. Raises bounds.Unparseable where
    Kafka's reader would fail."""
    cuts = bounds.Cuts()
    end = len(frame)
    try:
        pos = bounds.walker(header_class)(frame, 0, end, cuts)
        bounds.walker(body_class)(frame, pos, end, cuts)
    except (IndexError, struct.error):
        raise bounds.Unparseable(bounds.TRUNCATED) from None
    for owner, tag in cuts.tags:
        elsewhere = _versions_with_tag(owner, tag)
        if elsewhere:
            raise bounds.Unparseable(
                f"{owner.__name__}: tag {tag} is not valid for version "
                f"{owner.__version__} (only "  # type: ignore[attr-defined]  # kio's class attribute
                f"{_ranges(elsewhere)})"
            )
    if not cuts.spans:
        return None
    out = bytearray()
    at = 0
    for start, stop, replacement in sorted(cuts.spans):
        out += frame[at:start]
        out += replacement
        at = stop
    out += frame[at:]
    return bytes(out)


def _versions_with_tag(owner: type, tag: int) -> tuple[int, ...]:
    """The other versions of ``owner``'s request in which its struct holds ``tag``: Kafka generates one
    reader per struct for all versions, and refuses a tag of that struct outside the versions that hold
    it. Empty for a tag no version knows (the request header holds none)."""
    api_key = getattr(owner, "__api_key__", None)
    if api_key is None:
        return ()
    return _struct_tags(api_key, owner.__name__).get(tag, ())


@functools.cache
def _struct_tags(api_key: int, struct_name: str) -> dict[int, tuple[int, ...]]:
    """tag -> the request versions (in kio's schemas) whose struct ``struct_name`` holds it."""
    found: dict[int, list[int]] = {}
    for version, paths in sorted(schema_name_map[api_key_map[api_key]].items()):
        path = paths.get(EntityType.request)
        if path is None:
            continue
        cls = getattr(importlib.import_module(path.split(":", 1)[0]), struct_name, None)
        if cls is None or not cls.__flexible__:
            continue
        for field in fields(cls):
            tag = get_field_tag(field)
            if tag is not None:
                found.setdefault(tag, []).append(version)
    return {tag: tuple(versions) for tag, versions in found.items()}


def _ranges(versions: tuple[int, ...]) -> str:
    return f"v{versions[0]}" if len(versions) == 1 else f"v{versions[0]}-v{versions[-1]}"
