"""Prices for usage without a provider-reported cost (SPEC §11.3), from the maintained
``genai-prices`` catalogue (the optional extra ``tripwire[prices]``).

``estimate(usage)`` prices one ``Usage`` by provider, model and token classes (input, cached
input read and write, output). The result says whether the cost is an estimate, or why there
is none: a model the catalogue does not know is announced once per model on the ``tripwire``
logger, and cost ceilings cannot trip on its usage. Used by ``tripwire replay`` and the hooks.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from ..base.log import LOGGER, ONCE
from .events import Usage

__all__ = ["Priced", "estimate", "PriceCatalogue", "NO_MODEL", "model_name"]

#: How usage that names no model is listed among the unpriced (it has no price to look up).
NO_MODEL = "(no model)"


def model_name(model: str | None) -> str:
    """A usage's model as the unpriced models list it: its name, or ``NO_MODEL``."""
    return model or NO_MODEL


@dataclass(frozen=True, slots=True)
class Priced:
    """``cost_usd``: the usage's cost (None: none known); ``estimated``: computed from token
    prices rather than reported; ``unpriced``: the model has no price, so no cost."""

    cost_usd: float | None
    estimated: bool = False
    unpriced: bool = False


REPORTED = Priced(None)


class PriceCatalogue:
    """genai-prices behind a cache of the models it does not know (each announced once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._unknown: set[str] = set()
        self._calc: Any = None
        self._missing = False  # genai-prices is not installed (announced once)
        self._rates = _RateCards()

    def _calculator(self) -> Any:
        if self._calc is None and not self._missing:
            try:
                from genai_prices import Usage as CatalogueUsage
                from genai_prices import calc_price
            except ImportError:
                self._missing = True
                LOGGER.warning("usage without cost_usd cannot be priced: the price "
                               "catalogue is not installed (pip install 'tripwire[prices]'); "
                               "cost ceilings cannot trip on such usage", extra=ONCE)
                return None
            self._calc = (calc_price, CatalogueUsage)
        return self._calc

    def estimate(self, usage: Usage) -> Priced:
        """The cost of ``usage``: as reported, estimated from the catalogue, or none."""
        if usage.cost_usd is not None:
            return Priced(usage.cost_usd)
        if not usage.input_tokens and not usage.output_tokens:
            return REPORTED  # nothing to price
        model = usage.model or ""
        calculator = self._calculator()
        if calculator is None:
            return Priced(None, unpriced=True)
        if model in self._unknown:
            return Priced(None, unpriced=True)
        cost = self._lookup(calculator, usage, model)
        if cost is None:
            with self._lock:
                first = model not in self._unknown
                self._unknown.add(model)
            if first and not model:
                LOGGER.warning("usage that names no model cannot be priced: it has no cost, "
                               "and cost ceilings cannot trip on it (give its model, or its "
                               "cost_usd)", extra=ONCE)
            elif first:
                LOGGER.warning(f"model {model!r} has no price in the catalogue: its usage has "
                               "no cost, and cost ceilings cannot trip on it", extra=ONCE)
            return Priced(None, unpriced=True)
        return Priced(cost, estimated=True)

    def _lookup(self, calculator: Any, usage: Usage, model: str) -> float | None:
        calc_price, CatalogueUsage = calculator
        tokens = (usage.input_tokens or 0, usage.output_tokens or 0,
                  usage.cache_read_tokens or 0, usage.cache_write_tokens or 0)
        found = self._rates.resolve(usage.provider, model)
        if found is not None:
            cost = self._rates.cost(found, tokens)
            if cost is not None:
                return cost
        # the catalogue itself: models without a rate card, and usage it may refuse
        priced = CatalogueUsage(input_tokens=tokens[0], output_tokens=tokens[1],
                                cache_read_tokens=tokens[2], cache_write_tokens=tokens[3])
        for provider, ref in _attempts(usage.provider, model):
            try:
                return float(calc_price(priced, ref, provider_id=provider).total_price)
            except LookupError:
                continue
        return None


def _attempts(provider: str | None, model: str) -> list[tuple[str | None, str]]:
    """A harness's "provider/model" spelling (litellm style) is tried split as well."""
    attempts = [(provider, model)]
    if "/" in model:
        prefix, rest = model.split("/", 1)
        attempts.append((prefix, rest))
        attempts.append((None, rest))
    return attempts


# a price object's rate card: its sorted tier starts, and each bracket's (fixed, input,
# output, cache read, cache write) rates; bracket n is a prompt past n of the starts
_Card = tuple[list[int], dict[int, tuple[Decimal, ...]]]


class _RateCards:
    """Each model's cost as exact per-token rates, so a usage costs four Decimal products
    (~6 us) instead of genai-prices' unit decomposition (~0.25-0.5 ms a call, a quarter of a
    gateway request's CPU).

    The rates are read from the catalogue itself, never typed in: within one price bracket
    (tiered prices apply one rate to every token once the prompt passes a tier's start) the
    cost is affine in the four token classes (a price per request is the fixed part), so it
    is ``calc_price`` of a few probe usages at the bracket's first prompt sizes. Decimal arithmetic on these prices is exact, so the
    result is the float the catalogue would give, bit for bit. A card is kept per price
    object (conditional, time-of-day prices are separate objects, chosen at each call) and
    dropped when the catalogue's snapshot changes; a card that does not reproduce a check
    probe is refused, and such models are priced by the catalogue on every call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snapshot: Any = None
        self._models: dict[tuple[str | None, str], Any] = {}
        self._cards: dict[int, tuple[Any, _Card | None]] = {}  # by id(price object)

    def resolve(self, provider: str | None, model: str) -> Any:
        """(catalogue provider, model info) for a usage's names, or None (not found, or the
        catalogue is missing): the caller then asks the catalogue itself."""
        try:
            from genai_prices import data_snapshot
        except ImportError:
            return None
        snapshot = data_snapshot.get_snapshot()
        key = (provider, model)
        with self._lock:
            if snapshot is not self._snapshot:  # an updated catalogue: start again
                self._snapshot, self._models, self._cards = snapshot, {}, {}
            if key in self._models:
                return self._models[key]
        found = None
        for provider_id, ref in _attempts(provider, model):
            try:
                found = snapshot.find_provider_model(ref, None, provider_id, None)
                break
            except LookupError:
                continue
        with self._lock:
            self._models[key] = found
        return found

    def cost(self, found: Any, tokens: tuple[int, int, int, int]) -> float | None:
        """The cost of ``tokens`` (input, output, cache read, cache write) from the rate
        card, or None where the catalogue must decide (usage it would refuse, no card)."""
        prompt, _, read, write = tokens
        if prompt < 1 or read + write > prompt or min(tokens) < 0 \
                or not all(type(n) is int for n in tokens):
            return None
        provider, info = found
        now = datetime.now(tz=UTC)
        prices = info.get_prices(now)
        entry = self._cards.get(id(prices))
        if entry is None or entry[0] is not prices:
            entry = (prices, self._card(provider, info, prices, now))
            with self._lock:
                self._cards[id(prices)] = entry
        card = entry[1]
        if card is None:
            return None
        starts, by_bracket = card
        rates = by_bracket.get(bisect_left(starts, prompt))  # the tiers the prompt passes
        if rates is None:
            return None
        return float(_affine(rates, tokens))

    @staticmethod
    def _card(provider: Any, info: Any, prices: Any, now: datetime) -> _Card | None:
        from genai_prices import Usage as CatalogueUsage
        from genai_prices.types import TieredPrices

        starts = sorted({tier.start for value in vars(prices).values()
                         if isinstance(value, TieredPrices) for tier in value.tiers})

        def price(prompt: int, output: int = 0, read: int = 0, write: int = 0) -> Decimal:
            usage = CatalogueUsage(input_tokens=prompt, output_tokens=output,
                                   cache_read_tokens=read, cache_write_tokens=write)
            total: Decimal = info.calc_price(usage, provider, genai_request_timestamp=now).total_price
            return total

        by_bracket: dict[int, tuple[Decimal, ...]] = {}
        try:
            for bracket in range(len(starts) + 1):
                prompt = 1 if bracket == 0 else starts[bracket - 1] + 1
                if bisect_left(starts, prompt) != bracket:
                    continue  # a bracket no prompt of one token or more falls in
                if bisect_left(starts, prompt + 1) != bracket:
                    return None  # a bracket of one prompt size: the catalogue decides
                base = price(prompt)
                per_input = price(prompt + 1) - base
                fixed = base - per_input * prompt  # a price per request, where there is one
                rates = (fixed, per_input, price(prompt, 1) - base,
                         price(prompt, 0, 1) - base, price(prompt, 0, 0, 1) - base)
                check = (prompt + 1, 7, 1, 1)
                if _affine(rates, check) != price(*check):
                    return None  # not affine in the token classes: the catalogue decides
                by_bracket[bracket] = rates
        except (ValueError, ArithmeticError, LookupError):
            return None
        return starts, by_bracket


def _affine(rates: tuple[Decimal, ...], tokens: tuple[int, ...]) -> Decimal:
    """A card's cost of ``tokens``: the fixed part plus each class's count at its rate."""
    return rates[0] + sum((rate * n for rate, n in zip(rates[1:], tokens)), Decimal(0))


_CATALOGUE = PriceCatalogue()


def estimate(usage: Usage) -> Priced:
    """``usage`` priced by the process-wide catalogue (see ``PriceCatalogue.estimate``)."""
    return _CATALOGUE.estimate(usage)
