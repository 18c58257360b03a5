"""Top-level source module, loaded by a plain `import`."""
PLAIN = "plain"
