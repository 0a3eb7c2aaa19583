"""The rulebook language: loading, overlays, CEL and its functions, the guard, static checks, lint."""
