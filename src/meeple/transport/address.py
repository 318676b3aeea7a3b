"""Addresses env servers accept; no imports, so config validation can check them at start."""

from __future__ import annotations

HOST = "127.0.0.1"  # servers bind the loopback interface only


def is_loopback_address(address: str) -> bool:
    """``127.0.0.1:PORT`` or ``localhost:PORT``: the only HTTP addresses servers bind."""
    host, _, port = address.rpartition(":")
    return host in (HOST, "localhost") and port.isdigit()
