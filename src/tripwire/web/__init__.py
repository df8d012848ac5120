"""What the HTTP servers (``tripwire serve`` and ``tripwire gateway``) share: the bearer check,
bounded JSON bodies, one-line JSON errors, request metrics, and the operator routes over a
fleet (health, metrics, a session's guardrails, its reset), so an operator surface is written
once and mounted on both. Starlette is imported by the functions that build routes only."""
