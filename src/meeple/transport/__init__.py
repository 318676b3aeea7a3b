"""Env servers and their clients: the wire protocol (docs/protocol.md), socket, HTTP and
shared-memory transports, the server that hosts array envs, and ``RemoteEnv``."""
