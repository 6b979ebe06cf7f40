//! The summary a user reads first: total cycles and time at the clock,
//! the estimate, where the cycles went, the bottleneck tile and the three
//! biggest opportunities.

use super::{code_spans, escape, kind_colour, op_colours, thousands};
use crate::profile::analysis::{self, KindCycles, OpRow, Opportunity, TileTotals};
use crate::profile::summary::signed_percent;
use crate::profile::{Profile, StepKind};
use std::fmt::Write as _;

/// The derived figures every section of the page reads.
pub(super) struct Analysis {
    pub kinds: KindCycles,
    pub ops: Vec<OpRow>,
    pub tiles: Vec<TileTotals>,
    pub opportunities: Vec<Opportunity>,
    pub used_tiles: usize,
}

impl Analysis {
    pub(super) fn of(profile: &Profile) -> Analysis {
        let ops = analysis::op_rows(profile);
        Analysis {
            kinds: analysis::by_kind(profile),
            opportunities: analysis::opportunities(profile, &ops),
            tiles: analysis::tile_totals(profile),
            used_tiles: analysis::used_tiles(profile),
            ops,
        }
    }
}

/// A horizontal bar of `parts` (`(label, cycles, CSS colour)`), widths in
/// percent of `total`, with a legend.
pub(crate) fn stacked_bar(parts: &[(String, u64, String)], total: u64) -> String {
    let total = total.max(1) as f64;
    let mut bar = String::from("<div class=\"stack\">");
    let mut legend = String::from("<ul class=\"legend\">");
    for (label, cycles, colour) in parts {
        let percent = 100.0 * *cycles as f64 / total;
        if *cycles > 0 {
            let _ = write!(
                bar,
                "<span style=\"background:{colour};width:{percent:.3}%\" title=\"{}: {} cycles ({percent:.1} %)\"></span>",
                escape(label),
                thousands(*cycles)
            );
        }
        let _ = write!(
            legend,
            "<li><i style=\"background:{colour}\"></i>{} <b>{percent:.1} %</b> <span class=\"dim\">{} cycles</span></li>",
            escape(label),
            thousands(*cycles)
        );
    }
    bar.push_str("</div>");
    legend.push_str("</ul>");
    bar + &legend
}

pub(super) fn section(profile: &Profile, analysis: &Analysis) -> String {
    let mut out = String::from("<section id=\"summary\"><h2>Summary</h2><div class=\"cards\">");
    let total = profile.total_cycles;
    let error = (profile.estimated_cycles > 0)
        .then(|| total as f64 / profile.estimated_cycles as f64 - 1.0);
    let card = |out: &mut String, title: &str, (value, note): (String, String)| {
        let _ = write!(
            out,
            "<div class=\"card\"><div class=\"dim\">{title}</div><div class=\"big\">{value}</div><div class=\"dim\">{note}</div></div>"
        );
    };
    card(
        &mut out,
        "Total",
        (
            format!("{} cycles", thousands(total)),
            format!(
                "{:.1} µs at {:.2} GHz",
                profile.micros(total),
                profile.clock_hz as f64 / 1e9
            ),
        ),
    );
    card(
        &mut out,
        "Estimated by the compiler",
        (
            format!("{} cycles", thousands(profile.estimated_cycles)),
            format!("measured is {} of it", signed_percent(error)),
        ),
    );
    let target = profile.target();
    card(
        &mut out,
        "Tiles",
        (
            format!("{} of {}", analysis.used_tiles, target.tiles),
            format!(
                "{:.1} % of the chip",
                100.0 * analysis.used_tiles as f64 / f64::from(target.tiles)
            ),
        ),
    );
    if let Some((tile, cycles)) = analysis::bottleneck_tile(&analysis.tiles) {
        card(&mut out, "Bottleneck tile", {
            let link = format!(
                "<a href=\"#memory\" data-tile=\"{tile}\" class=\"tile-link\">tile {tile}</a>"
            );
            let share = 100.0 * cycles as f64 / total.max(1) as f64;
            // Below a tenth of the run the load is even: say so rather
            // than crown a tile that only leads by a little.
            if share < 10.0 {
                (
                        "none".to_string(),
                        format!(
                            "the load is even: {link} leads, slowest in steps worth {} cycles ({share:.1} %)",
                            thousands(cycles)
                        ),
                    )
            } else {
                (
                    link,
                    format!(
                        "the slowest in steps worth {} cycles ({share:.1} %)",
                        thousands(cycles)
                    ),
                )
            }
        });
    }
    out.push_str("</div><h3>Where the cycles went</h3>");
    let kinds: Vec<(String, u64, String)> = StepKind::ALL
        .into_iter()
        .map(|k| {
            (
                k.name().to_string(),
                analysis.kinds.get(k),
                kind_colour(k).to_string(),
            )
        })
        .collect();
    out.push_str(&stacked_bar(&kinds, total));
    // Colours are the timeline's: by kind of operation, shaded per operation.
    let colours = op_colours(profile);
    let mut ops: Vec<(usize, &OpRow)> = analysis
        .ops
        .iter()
        .enumerate()
        .filter(|(_, o)| o.total() > 0)
        .collect();
    ops.sort_by(|a, b| {
        b.1.total()
            .cmp(&a.1.total())
            .then_with(|| a.1.name.cmp(&b.1.name))
    });
    let shown = 8;
    let mut parts: Vec<(String, u64, String)> = ops
        .iter()
        .take(shown)
        .map(|(_, o)| {
            let colour = colours.get(&o.name).cloned().unwrap_or_default();
            (o.name.clone(), o.total(), colour)
        })
        .collect();
    let others: u64 = ops.iter().skip(shown).map(|(_, o)| o.total()).sum();
    if others > 0 {
        parts.push(("other operations".into(), others, "#aab1bd".into()));
    }
    let unattributed = total.saturating_sub(ops.iter().map(|(_, o)| o.total()).sum());
    if unattributed > 0 {
        parts.push((
            "no operation's (host transfers, carried values)".into(),
            unattributed,
            "#d5d9df".into(),
        ));
    }
    out.push_str("<p class=\"dim\">By operation (its compute, exchange and syncs):</p>");
    out.push_str(&stacked_bar(&parts, total));
    if !analysis.opportunities.is_empty() {
        out.push_str("<h3>Biggest opportunities</h3><ol class=\"opportunities\">");
        for o in &analysis.opportunities {
            let _ = write!(
                out,
                "<li><b>{}</b> <span class=\"saving\">up to {} cycles ({:.1} %)</span><br><span class=\"dim\">{}</span></li>",
                code_spans(&o.title),
                thousands(o.saving_cycles),
                100.0 * o.saving_cycles as f64 / total.max(1) as f64,
                code_spans(&o.detail)
            );
        }
        out.push_str("</ol>");
    }
    out.push_str("</section>\n");
    out
}
