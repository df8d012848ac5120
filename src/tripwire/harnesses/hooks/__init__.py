"""Live hooks into Claude Code and Codex (SPEC §11.4): what a harness's hook events mean.

One module per harness says how its payloads read (``claude_code.py``, ``codex.py``);
``_contract.py`` writes the output both read; ``_model.py`` holds the event and the verdict;
``_session.py`` keeps a session across invocations in the store (every event is a new
process); ``_transcript.py`` reads the usage the harness's transcript records. The command
that runs them, ``tripwire hook``, is ``cli/hook.py`` (its resident server ``cli/hook_server.py``).
"""
