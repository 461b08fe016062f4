"""What the pre-flight probe learns when an engine refuses what a run would send.

``check`` streams one short request before LoadGen starts; where it fails, ``learn``
reads the failure and, where one rule explains it and the option it changes was left at
its default, changes that option and the probe tries again. Each change is kept as a
note quoting what the engine answered, and goes into the run's record
(``EndpointRecord.learned``): the run says what the engine did, never what it was
assumed to do. An option the user set is never changed (the failure is then the error).

The rules (``RULES``), each found on ``transformers serve`` 5.24 (``docs/llm-endpoints.md``):

* a token-id prompt refused ("prompt must be a string"): prompts sent as the dataset's
  text (``prompt_as``);
* ``return_token_ids`` refused as an unknown field: output ids are the card tokenizer's
  reading of the text (``token_source``);
* ``min_tokens`` refused as an unknown field: the card's minimum is not asked of the
  engine (``min_tokens_field``; the record says it was not asked, never that it held);
* a stream that ends without ``data: [DONE]`` after an event with ``finish_reason``,
  only from an engine the probe identified as one known to send none
  (``ENDS_WITHOUT_DONE``): the response's end ends it (``end_without_done``).

And one reconciliation, on every response (``ClientSettings.with_eos``): with
``tokenizer`` ids, a stream that ended on ``stop`` with usage exactly one above its text's
ids ended on EOS, which the engine counts and its text omits (decoded without special
tokens); EOS is appended, as the reference keeps it in its output
(``suite.llm.generation``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from suite.llm.endpoint.client import ClientSettings

#: Engines known to end a completion stream without ``data: [DONE]``, as the probe
#: identifies them (``ServerRecord.engine``).
ENDS_WITHOUT_DONE = frozenset({"transformers serve"})

#: The options ``learn`` may change, as ``[backend.openai]`` names them.
ADAPTABLE = frozenset({"prompt_as", "token_source", "min_tokens_field"})


@dataclass(frozen=True)
class Rule:
    """A failure the probe recognises, and the option change that answers it."""

    option: str  # the [backend.openai] option, or "end_without_done"
    value: Any
    signs: tuple[str, ...]  # every one appears in the failure's message
    note: str

    def matches(self, message: str) -> bool:
        return all(sign in message for sign in self.signs)


RULES = (
    Rule("token_source", "tokenizer", ("Unexpected fields", "return_token_ids"),
         "the engine refuses return_token_ids, so it streams no token ids: the output ids "
         "are the card tokenizer's reading of its text (token_source = \"tokenizer\")"),
    Rule("min_tokens_field", False, ("Unexpected fields", "min_tokens"),
         "the engine refuses min_tokens: the card's min_new_tokens was not asked of it "
         "(min_tokens_field = false)"),
    Rule("prompt_as", "text", ("prompt must be a string",),
         "the engine refuses token-id prompts: prompts are sent as the dataset's text "
         "(prompt_as = \"text\")"),
    Rule("token_source", "tokenizer", ("streamed text but no token ids",),
         "the engine streams text without token ids: the output ids are the card "
         "tokenizer's reading of its text (token_source = \"tokenizer\")"),
)

#: The rule for an engine known to send no ``[DONE]``.
NO_DONE = Rule("end_without_done", True, ("without 'data: [DONE]'",),
               "the engine ends its streams without data: [DONE] (known of it): a stream "
               "ends at the response's end, after an event with finish_reason")


def option_changes(settings: ClientSettings, option: str, value: Any,
                   min_tokens: int) -> ClientSettings:
    """``settings`` with one learned option applied."""
    if option == "min_tokens_field":
        return replace(settings, min_tokens=min_tokens if value else 0)
    return replace(settings, **{option: value})


def learn(settings: ClientSettings, engine: str, adaptable: frozenset[str],
          attempt: Callable[[ClientSettings], str | None],
          learned: dict[str, Any], notes: list[str]) -> tuple[ClientSettings, str | None]:
    """Try ``attempt`` (one short request; its failure's message, or None) until it
    passes, changing one option a time by ``RULES``: the settings last tried, and the
    failure no rule explains (None: it passed)."""
    rules = [r for r in RULES if r.option in adaptable]
    if engine in ENDS_WITHOUT_DONE:
        rules.append(NO_DONE)
    while True:
        message = attempt(settings)
        rule = next((r for r in rules if message is not None and r.matches(message)
                     and learned.get(r.option) != r.value), None)
        if rule is None or message is None:  # passed, or no rule left (each fires once)
            return settings, message
        learned[rule.option] = rule.value
        notes.append(f"{rule.note}; it answered: {message.rpartition(': HTTP ')[2][:160]}"
                     if ": HTTP " in message else rule.note)
        settings = option_changes(settings, rule.option, rule.value, settings.min_tokens)

