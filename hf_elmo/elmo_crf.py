"""A linear-chain conditional random field for the token-classification head (`use_crf=True`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


# Score given to tags that a partial label rules out; finite so that gradients stay defined.
_IMPOSSIBLE = -1e4


class ElmoCrf(nn.Module):
    """Linear-chain conditional random field over tag scores.

    A path y_1..y_n through a sentence of n words scores
    ``start[y_1] + sum_t emissions[t, y_t] + sum_t transitions[y_{t-1}, y_t] + end[y_n]``.
    All methods take `emissions` (batch, words, num_tags) and a `mask` (batch, words) of real words
    (ones then zeros per row); rows with no words contribute nothing.
    """

    def __init__(self, num_tags: int):
        super().__init__()
        self.start_transitions = nn.Parameter(torch.zeros(num_tags))
        self.end_transitions = nn.Parameter(torch.zeros(num_tags))
        self.transitions = nn.Parameter(torch.zeros(num_tags, num_tags))  # [from, to]

    def log_partition(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """log Z: logsumexp of the scores of every path, shape (batch,)."""
        mask = mask.bool()
        if emissions.shape[1] == 0:
            return emissions.new_zeros(emissions.shape[0])
        score = self.start_transitions + emissions[:, 0]  # (B, K)
        for t in range(1, emissions.shape[1]):
            step = torch.logsumexp(score.unsqueeze(2) + self.transitions + emissions[:, t].unsqueeze(1), dim=1)
            score = torch.where(mask[:, t : t + 1], step, score)
        log_z = torch.logsumexp(score + self.end_transitions, dim=1)
        return torch.where(mask.any(dim=1), log_z, torch.zeros_like(log_z))

    def log_likelihood(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """log p(tags | emissions) per sentence, shape (batch,).

        A tag of -100 on a real word leaves that word unlabelled: the gold score sums over all tags there.
        """
        labelled = tags != -100
        allowed = F.one_hot(tags.clamp(min=0), emissions.shape[-1]).bool() | ~labelled.unsqueeze(-1)
        gold = self.log_partition(emissions.masked_fill(~allowed, _IMPOSSIBLE), mask)
        return gold - self.log_partition(emissions, mask)

    def marginals(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """p(tag at word t | sentence) by the forward-backward algorithm, (batch, words, num_tags), 0 at padding."""
        mask = mask.bool()
        num_words = emissions.shape[1]
        if num_words == 0:
            return torch.zeros_like(emissions)
        alphas = [self.start_transitions + emissions[:, 0]]
        for t in range(1, num_words):
            step = torch.logsumexp(alphas[-1].unsqueeze(2) + self.transitions + emissions[:, t].unsqueeze(1), dim=1)
            alphas.append(torch.where(mask[:, t : t + 1], step, alphas[-1]))
        end = self.end_transitions.expand_as(alphas[0])
        betas = [end]
        for t in range(num_words - 2, -1, -1):
            step = torch.logsumexp(self.transitions + (emissions[:, t + 1] + betas[-1]).unsqueeze(1), dim=2)
            # Word t is its sentence's last when word t+1 is padding: nothing follows but the end transition.
            betas.append(torch.where(mask[:, t + 1 : t + 2], step, end))
        log_z = torch.logsumexp(alphas[-1] + self.end_transitions, dim=1)
        scores = torch.stack(alphas, dim=1) + torch.stack(betas[::-1], dim=1) - log_z[:, None, None]
        return scores.exp() * mask.unsqueeze(-1).to(scores.dtype)

    def viterbi_decode(self, emissions: torch.Tensor, mask: torch.Tensor, pad_id: int = -100) -> torch.Tensor:
        """Highest-scoring tag sequence per sentence, (batch, words) with `pad_id` past each end."""
        mask = mask.bool()
        batch, num_words, num_tags = emissions.shape
        if num_words == 0:
            return torch.full((batch, 0), pad_id, dtype=torch.long, device=emissions.device)
        score = self.start_transitions + emissions[:, 0]
        keep = torch.arange(num_tags, device=emissions.device).expand(batch, num_tags)
        backpointers = []
        for t in range(1, num_words):
            candidates = score.unsqueeze(2) + self.transitions  # (B, from, to)
            best_score, best_previous = candidates.max(dim=1)
            step_mask = mask[:, t : t + 1]
            score = torch.where(step_mask, best_score + emissions[:, t], score)
            # Past a row's end the path stays on its last tag, so backtracking starts from the true end.
            backpointers.append(torch.where(step_mask, best_previous, keep))
        best_last = (score + self.end_transitions).argmax(dim=1)
        path = [best_last]
        for pointers in reversed(backpointers):
            path.append(pointers.gather(1, path[-1].unsqueeze(1)).squeeze(1))
        tags = torch.stack(path[::-1], dim=1)
        return tags.masked_fill(~mask, pad_id)
