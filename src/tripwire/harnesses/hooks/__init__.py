"""Live hooks into Claude Code, Codex, Gemini CLI and Cursor (SPEC §11.4-§11.5): what a
harness's hook events mean.

One module per harness says how its payloads read and how its answers are written
(``claude_code.py``, ``codex.py``, ``gemini_cli.py``, ``cursor.py``); ``_contract.py`` writes
the output Claude Code and Codex read; ``_model.py`` holds the event and the verdict;
``_session.py`` keeps a session across invocations in the store (every event is a new
process), one session whichever harness's hook reports it; ``_transcript.py`` reads the usage
the harness's transcript records. ``_settings.py`` finds, replaces and removes tripwire's
entries in a harness's settings file, and ``_codex_trust.py`` computes and writes the trust
Codex requires. The command that runs them, ``tripwire hook``, is ``cli/hook.py`` (its
installer ``cli/hook_install.py``, its resident server ``cli/hook_server.py``, and ``tripwire
doctor`` ``cli/doctor.py``).
"""
