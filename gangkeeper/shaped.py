"""JSON decoded into a shape, or read whole when it does not fit: shared by the controller's
informers (`controller.reading.shapes`) and the webhook's /mutate (`webhook.shapes`), each of
which writes its own shape (a `TypedDict` naming only what it reads)."""

from typing import Any

import msgspec
import orjson


def decoded(decoder: msgspec.json.Decoder, data: bytes) -> Any:
    """`data` decoded through the decoder's shape; else as orjson reads it (JSON off the shape,
    or nested deeper than msgspec goes), or orjson's ValueError (not JSON)."""
    try:
        return decoder.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return orjson.loads(data)
