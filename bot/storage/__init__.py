"""The Redis layer: key names, Lua scripts, the store (the only code that talks to Redis), connections."""
