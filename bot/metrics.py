"""Prometheus counters. Served at ``GET /metrics`` in HTTP mode (prometheus-client's text format)."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter

__all__ = ["METRICS", "Metrics"]


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=lambda: CollectorRegistry(auto_describe=True))

    def __post_init__(self) -> None:
        r = self.registry
        self.asks = Counter(
            "slack_ask_intake_total", "Intake entries by what became of them", ["result"], registry=r
        )
        self.results = Counter(
            "slack_ask_results_total", "Results pushed to agents by outcome", ["outcome"], registry=r
        )
        self.dead_letters = Counter(
            "slack_ask_dead_letters_total", "Entries parked on the dead-letter stream", ["reason"], registry=r
        )
        self.refusals = Counter("slack_ask_refusals_total", "Human actions refused", ["kind"], registry=r)
        self.timeouts = Counter("slack_ask_timeouts_total", "Asks that reached their deadline", registry=r)
        self.escalations = Counter("slack_ask_escalations_total", "Escalation steps posted", registry=r)


METRICS = Metrics()
