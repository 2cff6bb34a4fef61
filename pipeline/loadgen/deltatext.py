"""The text a streamed choice carries (pure): a completions ``text``, or a chat ``delta``'s visible content (a string or
a list of content parts), its reasoning (``reasoning_content``, ``reasoning``, thinking parts) and its tool-call
fragments, each of which is generated output and so a token arrival.
"""

from __future__ import annotations

from typing import Any


def tool_call_text(delta: dict[str, Any]) -> str:
    """The generated text of a chat delta's tool calls: each ``function``'s ``name`` and ``arguments`` fragment.

    Tool-call deltas are streamed output (the model generated them; the final usage counts them): AIPerf PR #804,
    SGLang PR #36272, GuideLLM PR #687 count them and time TTFT at the first.  OpenAI's ``delta.tool_calls`` is a
    list of ``{index, id, type, function: {name, arguments}}``; the older ``delta.function_call`` one such function.
    """
    calls = delta.get("tool_calls")
    funcs = [c.get("function") for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
    if isinstance(delta.get("function_call"), dict):
        funcs.append(delta["function_call"])
    parts = []
    for f in funcs:
        if isinstance(f, dict):
            parts += [v for v in (f.get("name"), f.get("arguments")) if isinstance(v, str)]
    return "".join(parts)


def delta_text(choice: dict[str, Any]) -> tuple[str, str]:
    """(visible text, reasoning text) of one streamed choice (completions ``text`` or chat ``delta``; a chat
    delta's visible text is its ``content`` and its tool-call fragments, :func:`tool_call_text`)."""
    text = choice.get("text")
    if text is not None:
        return (text if isinstance(text, str) else "", "")
    delta = choice.get("delta")
    if not isinstance(delta, dict):
        return "", ""
    content = delta.get("content")
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    reasoning = reasoning if isinstance(reasoning, str) else ""
    if isinstance(content, list):  # content parts: text, and thinking (Magistral through LiteLLM)
        content, thought = _content_parts(content)
        reasoning += thought
    visible = (content if isinstance(content, str) else "") + tool_call_text(delta)
    return (visible, reasoning)


#: Part types whose text is reasoning (Mistral's ``ThinkChunk``, ``{"type": "thinking", "thinking": [...]}``).
THINKING_PARTS = ("thinking", "reasoning")


def _content_parts(parts: list[Any], depth: int = 0) -> tuple[str, str]:
    """(visible text, reasoning text) of ``delta.content`` given as a list of parts: a ``text`` part's ``text`` is
    visible; a ``thinking`` (or ``reasoning``) part's ``thinking``, ``reasoning`` or ``text`` (a string or a list of
    parts again) is reasoning.  Mistral's format, as LiteLLM streams Magistral:
    ``[{"type": "thinking", "thinking": [{"type": "text", "text": "…"}]}, {"type": "text", "text": "…"}]``."""
    visible, thought = [], []
    for part in parts:
        if isinstance(part, str):
            visible.append(part)
            continue
        if not isinstance(part, dict):
            continue
        if part.get("type") in THINKING_PARTS:
            inner = next((part[k] for k in ("thinking", "reasoning", "text") if k in part), None)
            if isinstance(inner, str):
                thought.append(inner)
            elif isinstance(inner, list) and depth < 4:  # parts inside (Mistral's): all of it is reasoning
                thought.append("".join(_content_parts(inner, depth + 1)))
        elif isinstance(part.get("text"), str):
            visible.append(part["text"])
    return "".join(visible), "".join(thought)
