"""Address: a HOST:PORT the gateway listens on, as the config writes it.

Its own module so that every config module can use it (config.py, config_serve.py) without importing
each other; gateway.config re-exports it, as the rest of the gateway imports it from there. `parse`
raises schema.Bad, which the config loader turns into an error naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.schema import Bad, digits


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> "Address":
        host, sep, port = text.rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if not sep or not host or not digits(port) or int(port) > 65535:
            raise Bad("", f"must be HOST:PORT, got {text!r}")
        return cls(host, int(port))

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
