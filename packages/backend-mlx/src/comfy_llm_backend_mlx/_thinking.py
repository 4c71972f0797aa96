r"""The thinking budget: close a reasoning block that would eat the answer's room.

Pure Python, no MLX: the generation loop feeds every generated token to
:meth:`ThinkingBudget.observe` and asks :meth:`ThinkingBudget.forced` which
token, if any, must replace the model's next choice.

Rules (``budget = max(1, max_new_tokens // 2)``):

* Reasoning tokens are the tokens generated inside an open ``<think>`` block
  (opened by the prompt or by a generated ``<think>``), not counting the
  ``<think>`` itself. The count is cumulative over the whole generation.
* When that count reaches ``budget`` and the model has not closed the block,
  the next token is forced to ``</think>``; the model is fed that token and
  answers with whatever remains of ``max_new_tokens``.
* When the chat template writes a line break before ``</think>`` (Qwen's
  ``"\n</think>"``), a single-token ``"\n"`` is forced first, but only if
  the reasoning does not already end a line and the newline still leaves
  room for ``</think>`` and at least one answer token.
* Nothing is forced when no room is left, when the model closes the block by
  itself, or when reasoning is disabled (the caller then builds no budget).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["ThinkingBudget", "thinking_budget_for"]


def thinking_budget_for(max_new_tokens: int) -> int:
    """Return the reasoning-token cap for a request: half of ``max_new_tokens``, at least 1.

    Args:
        max_new_tokens: The request's token budget (reasoning included).

    Returns:
        The cap on reasoning tokens.
    """
    return max(1, int(max_new_tokens) // 2)


class ThinkingBudget:
    """Tracks reasoning tokens and plans the forced close of the block.

    Attributes:
        budget: Reasoning tokens allowed before the block is closed.
        max_new_tokens: The whole generation's token budget.
        generated: Tokens observed so far (forced ones included).
        reasoning_tokens: Tokens observed inside the reasoning block.
        inside: Whether generation is currently inside the block.
        forced_close: Whether the block was (or is being) closed by the budget.
    """

    def __init__(
        self,
        *,
        max_new_tokens: int,
        open_id: int,
        close_id: int,
        newline_id: int | None,
        starts_inside: bool,
        ends_line: Callable[[int], bool],
    ) -> None:
        r"""Create the tracker for one generation.

        Args:
            max_new_tokens: The request's token budget; the cap is half of it.
            open_id: The id of ``<think>``.
            close_id: The id of ``</think>``.
            newline_id: The id of a lone ``"\n"`` to force before ``</think>``,
                or None when the template style wants none.
            starts_inside: The rendered prompt ends inside an open block.
            ends_line: Tells whether a token's text ends with a line break.
        """
        self.max_new_tokens = int(max_new_tokens)
        self.budget = thinking_budget_for(max_new_tokens)
        self._open_id = open_id
        self._close_id = close_id
        self._newline_id = newline_id
        self._ends_line = ends_line
        self.inside = bool(starts_inside)
        self.generated = 0
        self.reasoning_tokens = 0
        self.forced_close = False
        self._pending: list[int] = []
        self._last_reasoning_id: int | None = None

    def observe(self, token_id: int) -> None:
        """Record one generated (or forced) token.

        Args:
            token_id: The token that was just generated.
        """
        self.generated += 1
        if self._pending and token_id == self._pending[0]:
            self._pending.pop(0)
        if token_id == self._close_id:
            self.inside = False
            self._pending.clear()
            return
        if token_id == self._open_id and not self.inside:
            self.inside = True
            return
        if not self.inside:
            return
        self.reasoning_tokens += 1
        self._last_reasoning_id = token_id
        if self.reasoning_tokens >= self.budget and not self.forced_close:
            self._plan_close()

    def forced(self) -> int | None:
        """Return the token the next step must produce, or None to let the model choose."""
        return self._pending[0] if self._pending else None

    def _plan_close(self) -> None:
        remaining = self.max_new_tokens - self.generated
        if remaining <= 0:
            return
        self.forced_close = True
        wants_newline = (
            self._newline_id is not None
            and remaining >= 3
            and self._last_reasoning_id is not None
            and not self._ends_line(self._last_reasoning_id)
        )
        if wants_newline and self._newline_id is not None:
            self._pending = [self._newline_id, self._close_id]
        else:
            self._pending = [self._close_id]
