"""Python probes: source trees read without importing them (imports, symbols, constants, patches,
bindings, markers), and target interpreters asked in a child process (stack, modules, record)."""
