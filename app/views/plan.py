"""View of the `plan` lab: the cheapest fleet within the SLO, cost per hour against latency for
every simulated candidate (the Pareto front joined), the front as a table, then every candidate
with what the roofline pruned and why. The cheapest and each row of the front link to the fleet
lab with that configuration on the plan's workload (`FleetLab.of_candidate`), which shows the
same figures; a row the fleet lab would refuse (its rules or work budget: the plan allows more)
says so in one line instead, rather than a link whose URL the fleet lab would open with values reset."""

from __future__ import annotations

from typing import Any

import panel as pn
from bokeh.models import ColumnDataSource, HoverTool
from bokeh.plotting import figure

from app.i18n import tr, tr_message
from app.route import Route
from app.text import plain
from app.view import Explainer, LabView, TextTable, columns, percent
from app.views.drawing import legend_below
from app.widgets import link_button
from kvweb.fleet.candidate import Candidate
from kvweb.jsonable import number
from kvweb.lab import Lab, ParamError
from kvweb.labs.fleet import FleetLab

MEETS, MISSES = "#2ca02c", "#d62728"
# A link's label is a long configuration key: on a phone it wraps inside the button.
WRAPPED = ":host .bk-btn { white-space: normal; overflow-wrap: anywhere; text-align: left; height: auto; }"


def candidate_rows(rows: list[dict[str, Any]], lab: Lab) -> list[list[str]]:
    """One row per candidate: configuration, GPUs, $/h, latency, TPOT, attainment, verdict; with LoRA
    adapters, their loads into the replicas' slots."""
    q = lab.percentile
    out = []
    for r in rows:
        simulated = r["pruned"] is None
        verdict = (tr("meets the SLO") if r["meets_slo"] else tr("misses the SLO")) if simulated else tr(r["pruned"])
        out.append(
            [
                r["key"],
                f"{r['gpus']:,}",
                number(r["cost_per_hour"], 4),
                number(r[f"ttft_{q}_s"], 3) if simulated else "",
                number(1e3 * r[f"tpot_{q}_s"], 3) if simulated else "",
                percent(r["slo_attainment"]) if simulated else "",
                verdict,
                *((f"{r['adapter_loads']:,}" if simulated else "",) if lab.loras else ()),
            ]
        )
    return out


class PlanView(LabView):
    labs = ("plan",)

    def __init__(self) -> None:
        super().__init__()
        self.summary = plain(css_class="kv-plan-summary")
        self.points = ColumnDataSource(columns("cost", "latency", "key", "color", "verdict"), name="plan-points")
        self.front = ColumnDataSource(columns("cost", "latency", "key"), name="plan-front")
        self.chart = figure(
            title=tr("cost per hour against latency, every simulated candidate"),
            height=340,
            sizing_mode="stretch_width",
            min_width=300,
            tools="pan,wheel_zoom,reset,save",
            x_axis_label=tr("dollars per hour"),
            y_axis_type="log",
        )
        dots = self.chart.scatter(
            "cost", "latency", source=self.points, color="color", size=8, fill_alpha=0.5, legend_field="verdict"
        )
        self.chart.step(
            "cost", "latency", source=self.front, mode="after", line_color="#444444", legend_label=tr("Pareto front")
        )
        self.chart.add_tools(
            HoverTool(
                renderers=[dots],
                tooltips=[
                    (tr("configuration"), "@key"),
                    (tr("dollars per hour"), "@cost{0.00}"),
                    (tr("latency (s)"), "@latency{0.000}"),
                ],
            )
        )
        legend_below(self.chart)
        self.pareto = TextTable("plan-pareto", "kv-plan-pareto")
        self.explainer = Explainer("kv-plan-explain")  # the cheapest's cost, its formula
        self.everything = TextTable("plan-candidates", "kv-plan-candidates")
        self.open_cheapest = pn.Column(sizing_mode="stretch_width", margin=0)
        self.open_front = pn.Column(sizing_mode="stretch_width", margin=0)

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(
            self.summary,
            self.open_cheapest,
            self.explainer.layout,
            self.chart,
            plain(tr("Pareto front: no candidate is both cheaper and faster")),
            self.pareto.pane,
            self.open_front,
            plain(tr("every candidate")),
            self.everything.pane,
            sizing_mode="stretch_width",
        )

    def fleet_link(self, lab: Lab, row: dict[str, Any], label: str, css_class: str) -> pn.viewable.Viewable:
        """A button opening the fleet lab on the plan's workload with the row's configuration, or,
        where the fleet lab would refuse that configuration, one line saying why."""
        fleet = FleetLab.of_candidate(lab, Candidate.of(row))
        try:
            fleet.admit()
        except ParamError as refused:
            beyond = tr("beyond the fleet lab's limits, not linked")
            line = f"{row['key']}: {beyond}: {tr_message(str(refused))}"
            return pn.pane.Bokeh(plain(line, css_class="kv-plan-beyond"), sizing_mode="stretch_width")
        query = Route(lab=fleet).query()
        button = link_button(label, css_class, lambda: self.navigate(query))
        button.param.update(sizing_mode="stretch_width", styles={"max-width": "640px"}, stylesheets=[WRAPPED])
        return button

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        figure_of = f"{lab.latency}_{lab.percentile}_s"
        simulated = [r for r in result["candidates"] if r["pruned"] is None]
        self.points.data = {
            "cost": [r["cost_per_hour"] for r in simulated],
            "latency": [r[figure_of] for r in simulated],
            "key": [r["key"] for r in simulated],
            "color": [MEETS if r["meets_slo"] else MISSES for r in simulated],
            "verdict": [tr("meets the SLO") if r["meets_slo"] else tr("misses the SLO") for r in simulated],
        }
        front = result["pareto"]
        self.front.data = {
            "cost": [r["cost_per_hour"] for r in front],
            "latency": [r[figure_of] for r in front],
            "key": [r["key"] for r in front],
        }
        self.chart.yaxis.axis_label = f"{lab.latency.upper()} {lab.percentile} (s)"
        best = result["cheapest"]
        pruned = ", ".join(f"{tr(why)}: {n:,}" for why, n in result["pruned"].items())
        cheapest = (
            f"{tr('cheapest within the SLO')}: {best['key']}, {best['gpus']:,} GPU, "
            f"{number(best['cost_per_hour'], 4)} {tr('dollars per hour')}"
            if best
            else tr("no candidate meets the SLO")
        )
        # cost_model=auto says what priced the plan: a cost_model value, as the widget names it
        priced = f"\n{tr('step times')}: cost_model={result['pricing']}" if "pricing" in result else ""
        self.summary.text = (
            f"{result['candidates_total']:,} {tr('candidates')}: {result['evaluated']:,} "
            f"{tr('simulated')}; {tr('pruned by the roofline')}: {pruned}\n{cheapest}{priced}"
        )
        header = [
            tr("configuration"),
            "GPU",
            tr("dollars per hour"),
            f"TTFT {lab.percentile} (s)",
            f"TPOT {lab.percentile} (ms)",
            tr("SLO attainment"),
            tr("verdict"),
            *((tr("LoRA adapter loads"),) if lab.loras else ()),
        ]
        self.pareto.show(header, candidate_rows(front, lab))
        self.explainer.show(
            lab.explain(result),
            {"cost_per_hour": tr("dollars per hour"), "cost_per_million_tokens": tr("cost per million output tokens")},
            "cost_per_hour",
        )
        self.open_cheapest.objects = (
            [
                self.fleet_link(
                    lab, best, f"{tr('open the cheapest in the fleet lab')}: {best['key']}", "kv-plan-open-cheapest"
                )
            ]
            if best
            else []
        )
        self.open_front.objects = [
            self.fleet_link(lab, row, f"{tr('open in the fleet lab')}: {row['key']}", f"kv-plan-open-{i}")
            for i, row in enumerate(front)
        ]
        self.everything.show(
            header, candidate_rows(sorted(result["candidates"], key=lambda r: r["cost_per_hour"]), lab)
        )
