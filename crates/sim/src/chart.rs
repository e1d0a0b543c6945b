//! A sweep as a chart (SVG): one line per metadata organisation, MLB entries on a log-2
//! axis, the estimated slowdown (or, for a trace without instruction counts, the metadata
//! loads per lookup) on a log axis, as GPUArmor's Figs. 9-11 show them.

use plotters::prelude::*;

/// One point: an organisation's name, the buffer's entries, the value.
pub struct Point<'a> {
    pub series: &'a str,
    pub entries: u32,
    pub value: f64,
}

/// The series' names in a box, as both kinds of chart show them.
fn legend<'a, DB: DrawingBackend + 'a, X: Ranged, Y: Ranged>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}

/// Draws `points` into an SVG document: `what` names the value axis.
pub fn svg(title: &str, what: &str, points: &[Point]) -> Result<String, String> {
    svg_with(title, "MLB entries per SM (0 plotted at 0.5)", what, points)
}

/// [`svg`] with the horizontal axis named `x_what` (its values are [`Point::entries`]).
pub fn svg_with(title: &str, x_what: &str, what: &str, points: &[Point]) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (800, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let x_max = points.iter().map(|p| f64::from(p.entries.max(1))).fold(1.0, f64::max);
        let (lo, hi) = points.iter().fold((f64::MAX, f64::MIN), |(lo, hi), p| (lo.min(p.value), hi.max(p.value)));
        // A log axis: the list's walks reach a hundred times what the oracle costs.
        let lo = if lo > hi { 0.5 } else { (lo * 0.95).max(1e-3) };
        let hi = hi.max(lo * 1.1) * 1.05;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((0.5f64..x_max * 1.5).log_scale(), (lo..hi).log_scale())
            .map_err(|e| e.to_string())?;
        chart.configure_mesh().x_desc(x_what).y_desc(what).draw().map_err(|e| e.to_string())?;
        let mut names: Vec<&str> = points.iter().map(|p| p.series).collect();
        names.dedup();
        names.sort_unstable();
        names.dedup();
        for (i, name) in names.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let mut line: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| p.series == *name)
                .map(|p| (if p.entries == 0 { 0.5 } else { f64::from(p.entries) }, p.value.max(lo)))
                .collect();
            line.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart
                .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(*name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
            chart
                .draw_series(line.into_iter().map(|p| Circle::new(p, 3, color.filled())))
                .map_err(|e| e.to_string())?;
        }
        legend(&mut chart)?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// Grouped bars (SVG): for each group (a workload), one bar per series (a design), on a
/// linear axis from zero that `what` names; as the BCache paper's Figs. 9-12 show them.
pub fn bars(title: &str, what: &str, groups: &[&str], series: &[(&str, Vec<f64>)]) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (900, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let hi = series.iter().flat_map(|(_, v)| v.iter().copied()).fold(0.0, f64::max).max(1e-9) * 1.15;
        let n = groups.len().max(1);
        // The groups' names go in a strip below zero, inside the plot.
        let strip = hi * 0.08;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(10)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..n as f64, -strip..hi)
            .map_err(|e| e.to_string())?;
        chart.configure_mesh().disable_x_mesh().disable_x_axis().y_desc(what).draw().map_err(|e| e.to_string())?;
        chart
            .draw_series(groups.iter().enumerate().map(|(g, name)| {
                Text::new(name.to_string(), (g as f64 + 0.35, -strip * 0.4), ("sans-serif", 14).into_font())
            }))
            .map_err(|e| e.to_string())?;
        let k = series.len().max(1) as f64;
        let width = 0.8 / k;
        for (s, (name, values)) in series.iter().enumerate() {
            let color = Palette99::pick(s).to_rgba();
            let rects = values.iter().enumerate().map(|(g, v)| {
                let x0 = g as f64 + 0.1 + s as f64 * width;
                Rectangle::new([(x0, 0.0), (x0 + width * 0.9, *v)], color.filled())
            });
            chart
                .draw_series(rects)
                .map_err(|e| e.to_string())?
                .label(*name)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], color.filled()));
        }
        legend(&mut chart)?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bar_chart_names_its_groups_series_and_axis() {
        let svg = bars(
            "Miss latency",
            "cycles per miss",
            &["ppbench", "dedup"],
            &[("hardbound", vec![40.0, 30.0]), ("bcache", vec![25.0, 20.0])],
        )
        .unwrap();
        for words in ["ppbench", "dedup", "hardbound", "bcache", "cycles per miss", "Miss latency"] {
            assert!(svg.contains(words), "{words} missing");
        }
        // Four bars (and the legend's two marks).
        assert!(svg.matches("<rect").count() >= 6);
    }

    #[test]
    fn a_chart_names_its_series_and_axes() {
        let points = [
            Point { series: "list", entries: 0, value: 2.0 },
            Point { series: "list", entries: 8, value: 1.1 },
            Point { series: "bst", entries: 0, value: 1.1 },
            Point { series: "bst", entries: 8, value: 1.02 },
        ];
        let svg = svg("MLB sweep", "estimated slowdown", &points).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..100.min(svg.len())]);
        for words in ["list", "bst", "MLB entries per SM", "estimated slowdown", "MLB sweep"] {
            assert!(svg.contains(words), "{words} missing");
        }
    }
}
