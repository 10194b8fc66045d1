"""Request handlers, one module per family of APIs; ``broker/routes.py`` maps each API to one."""
