"""The core's charts (``handlers.ports.Charts``) drawn with matplotlib's Agg backend: no
display, no pyplot state, one figure per call in a worker thread, so a chart never holds up
the event loop that acks Slack. matplotlib is imported at the first chart, not at start: a
service that never draws one never loads it (nor builds its font cache, which the image
builds ahead)."""

from __future__ import annotations

import asyncio
import io

from handlers.spend.chart import Chart

BUSY, IDLE, SAVED, UNWATCHED = "#4a78c2", "#e0a030", "#3c9a5f", "#e6e6e6"
# the groups' colours, in the table's order (a colour-blind-safe set), the rest in grey
GROUPS = ("#4a78c2", "#e0a030", "#7e57c2", "#d1495b", "#00a6a6", "#8d6e63", "#ef86b8", "#9e9e9e")


class AggCharts:
    async def png(self, chart: Chart) -> bytes:
        return await asyncio.to_thread(draw, chart)


def draw(chart: Chart) -> bytes:
    """Each day's (or, over a long period, each week's) spend stacked, busy and idle or by
    the table's groups, what was saved beside it, and the days not watched in grey."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 4.2), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    bars = chart.bars()  # 60 at most, whatever the period
    days = range(len(bars))
    width = 0.4
    left = [x - width / 2 for x in days]
    missed = [x for x, d in zip(days, bars, strict=True) if not d.watched]
    for at, x in enumerate(missed):
        axes.axvspan(
            x - 0.5, x + 0.5, color=UNWATCHED, zorder=0, label="not watched" if not at else None
        )
    if chart.series:
        bottom = [0.0] * len(bars)
        for index, name in enumerate(chart.series):
            heights = [d.groups[index] if d.groups else 0.0 for d in bars]
            colour = GROUPS[min(index, len(GROUPS) - 1)]
            axes.bar(left, heights, width, bottom=bottom, label=name[:30], color=colour)
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    else:
        busy = [d.busy for d in bars]
        axes.bar(left, busy, width, label="spend, busy", color=BUSY)
        axes.bar(left, [d.idle for d in bars], width, bottom=busy, label="spend, idle", color=IDLE)
    axes.bar(
        [x + width / 2 for x in days],
        [d.saved for d in bars],
        width,
        label="saved",
        color=SAVED,
    )
    step = max(1, len(bars) // 10)
    axes.set_xticks(list(days)[::step], chart.labels(bars)[::step])
    axes.set_ylabel(f"US dollars a {chart.per}")
    axes.yaxis.set_major_formatter(lambda value, _: f"${value:,.0f}")
    axes.set_title(chart.title, loc="left")
    # above the bars, on the title's line, so it never hides a day
    axes.legend(loc="lower right", bbox_to_anchor=(1, 1), ncols=5, frameon=False, fontsize=8)
    axes.spines[["top", "right"]].set_visible(False)
    figure.text(0.01, 0.01, chart.note, fontsize=8, color="#666666")
    figure.tight_layout(rect=(0, 0.04, 1, 1))
    out = io.BytesIO()
    figure.savefig(out, format="png")
    return out.getvalue()
