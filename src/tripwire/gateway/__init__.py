"""``tripwire gateway``: a model-API proxy whose every response passes a session's guardrails
before the harness sees it (docs/gateway.md). A floor above the fleet, beside ``serve``: the
wire formats are ``interchange.wire``'s, the events go through the one dispatcher
(``session.dispatch``) into a ``Fleet``, and every reaction is a ``Decision`` the session
returned; the operator routes are ``web.operator``'s."""
