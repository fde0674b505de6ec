"""The one language toolkit (DESIGN.md §9): what the harness, the frontends and TTS know about
words. The evaluation imports none of it (it must not grade with the tables it grades).

- :mod:`.echo`: the assistant's own words heard back, taken out of a transcript.
- :mod:`.numbers`: spoken numbers and durations (on ``text2num``).
- :mod:`.places`: time zones from place names.
- :mod:`.repair`: fillers, disfluencies, self-corrections, chained requests.
- :mod:`.requests`: a request's content words, the request named back, a lead-in naming it.
- :mod:`.speech`: markdown and markup to plain speech, word-safe shortening.
"""
