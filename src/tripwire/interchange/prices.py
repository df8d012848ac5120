"""Prices for usage without a provider-reported cost (SPEC §11.3), from the maintained
``genai-prices`` catalogue (the optional extra ``tripwire[prices]``).

``estimate(usage)`` prices one ``Usage`` by provider, model and token classes (input, cached
input read and write, output). The result says whether the cost is an estimate, or why there
is none: a model the catalogue does not know is announced once per model on the ``tripwire``
logger, and cost ceilings cannot trip on its usage. Used by ``tripwire replay`` and the hooks.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
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

    @staticmethod
    def _lookup(calculator: Any, usage: Usage, model: str) -> float | None:
        calc_price, CatalogueUsage = calculator
        tokens = CatalogueUsage(input_tokens=usage.input_tokens or 0,
                                output_tokens=usage.output_tokens or 0,
                                cache_read_tokens=usage.cache_read_tokens or 0,
                                cache_write_tokens=usage.cache_write_tokens or 0)
        # a harness's "provider/model" spelling (litellm style) is tried split as well
        attempts = [(usage.provider, model)]
        if "/" in model:
            prefix, rest = model.split("/", 1)
            attempts.append((prefix, rest))
            attempts.append((None, rest))
        for provider, ref in attempts:
            try:
                return float(calc_price(tokens, ref, provider_id=provider).total_price)
            except LookupError:
                continue
        return None


_CATALOGUE = PriceCatalogue()


def estimate(usage: Usage) -> Priced:
    """``usage`` priced by the process-wide catalogue (see ``PriceCatalogue.estimate``)."""
    return _CATALOGUE.estimate(usage)
