"""The alphazero phase: schema and checks, builder, module, data and callbacks (one place)."""
