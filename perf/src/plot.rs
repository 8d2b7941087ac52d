//! `loadgen-perf plot ROOFLINE_JSON`: a roofline run's figures as SVG pictures (plotters):
//! each row's QPS beside its raw ceiling, and QPS against the client's worker count.
//!
//! Only the fields drawn are read, each optional where older files lack it, so every
//! roofline.json under perf/runs/ plots. Text is laid out with the font llm-loadgen ships
//! (plotters' `ab_glyph`), so no system font is looked up.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;
use plotters::prelude::*;
use serde::Deserialize;

/// `plot` flags.
#[derive(Debug, Clone, Args)]
pub struct PlotArgs {
    /// A roofline.json written by `loadgen-perf roofline`.
    pub roofline_json: PathBuf,
    /// Write the pictures here [default: the JSON file's folder].
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Deserialize)]
struct Roofline {
    #[serde(default)]
    host: Option<Host>,
    rows: Vec<Row>,
}

#[derive(Debug, Deserialize)]
struct Host {
    #[serde(default)]
    host: String,
    #[serde(default)]
    cores: usize,
    #[serde(default)]
    cpu_model: String,
}

#[derive(Debug, Clone, Deserialize)]
struct Row {
    row: String,
    stream: bool,
    qps: f64,
    #[serde(default)]
    ceiling_qps: Option<f64>,
    #[serde(default)]
    client_workers: Option<usize>,
}

impl Row {
    /// `burst off`, `c1000 stream`.
    fn series(&self) -> String {
        format!("{} {}", self.row, if self.stream { "stream" } else { "off" })
    }
}

/// The series colours (matplotlib's tab10); QPS is the first, the ceiling the second.
const COLOURS: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x17, 0xbe, 0xcf),
];

/// The font llm-loadgen's own pictures use (assets/fonts/README.md).
static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans-subset.ttf");

/// Reads the file, draws both pictures and lists them; a picture the file has no data for
/// is left out with a note.
pub fn run(args: &PlotArgs) -> anyhow::Result<()> {
    let path = &args.roofline_json;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let roofline: Roofline = serde_json::from_str(&text).with_context(|| {
        format!("{} is not a roofline.json (loadgen-perf roofline writes one)", path.display())
    })?;
    anyhow::ensure!(!roofline.rows.is_empty(), "{} has no rows to plot", path.display());
    plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
        .map_err(|_| anyhow::anyhow!("the built-in font does not load"))?;
    let out = match &args.out {
        Some(out) => out.clone(),
        None => path.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf),
    };
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let caption = host_caption(roofline.host.as_ref());
    let rows_svg = out.join("roofline_rows.svg");
    write_svg(&rows_svg, (row_chart_width(&roofline.rows), 520), |area| {
        draw_rows(&roofline.rows, &caption, area)
    })?;
    println!("{}", rows_svg.display());
    let by_workers = qps_by_workers(&roofline.rows);
    if by_workers.values().all(|points| points.len() < 2) {
        eprintln!(
            "note: skipped roofline_workers: every row ran at one worker count; \
             `loadgen-perf roofline --roofline-client-workers 1,2,4` sweeps them"
        );
        return Ok(());
    }
    let workers_svg = out.join("roofline_workers.svg");
    write_svg(&workers_svg, (900, 520), |area| draw_workers(&by_workers, &caption, area))?;
    println!("{}", workers_svg.display());
    Ok(())
}

fn host_caption(host: Option<&Host>) -> String {
    match host {
        Some(h) => format!("{} · {} cores · {}", h.host, h.cores, h.cpu_model),
        None => "host not recorded".to_string(),
    }
}

fn row_chart_width(rows: &[Row]) -> u32 {
    (200 + 110 * rows.len() as u32).clamp(700, 2400)
}

/// QPS per worker count of each row (rows without a worker count are left out).
fn qps_by_workers(rows: &[Row]) -> BTreeMap<String, Vec<(usize, f64)>> {
    let mut out: BTreeMap<String, Vec<(usize, f64)>> = BTreeMap::new();
    for r in rows {
        if let Some(w) = r.client_workers {
            out.entry(r.series()).or_default().push((w, r.qps));
        }
    }
    for points in out.values_mut() {
        points.sort_by_key(|p| p.0);
    }
    out
}

/// Renders into an SVG string and writes it through a temporary name.
fn write_svg(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, plotters::coord::Shift>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
        draw(&root)?;
        root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    let tmp = path.with_extension("svg.tmp");
    std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path)).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow::anyhow!("cannot write {}: {e}", path.display())
    })
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// Bars of each row's QPS, its ceiling's beside it where it has one.
fn draw_rows(rows: &[Row], caption: &str, area: &Area<'_>) -> anyhow::Result<()> {
    let e = |e: DrawingAreaErrorKind<_>| anyhow::anyhow!("{e}");
    let top = rows.iter().map(|r| r.qps.max(r.ceiling_qps.unwrap_or(0.0))).fold(1.0, f64::max);
    let several_counts = qps_by_workers(rows).values().any(|p| p.len() > 1);
    let names: Vec<String> = rows
        .iter()
        .map(|r| match (several_counts, r.client_workers) {
            (true, Some(w)) => format!("{} w{w}", r.series()),
            _ => r.series(),
        })
        .collect();
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("Roofline: QPS per row against the raw ceiling ({caption})"),
            ("sans-serif", 18),
        )
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5f64..rows.len() as f64 - 0.5, 0f64..top * 1.15)
        .map_err(e)?;
    let name_at = |x: &f64| {
        let whole = (x - x.round()).abs() < 1e-9 && *x >= 0.0;
        names.get(x.round() as usize).filter(|_| whole).cloned().unwrap_or_default()
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(rows.len() + 1)
        .x_label_formatter(&name_at)
        .y_desc("QPS")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(e)?;
    let (qps_colour, ceiling_colour) = (COLOURS[0], COLOURS[1]);
    let bars = rows.iter().enumerate().map(|(i, r)| {
        Rectangle::new([(i as f64 - 0.38, 0.0), (i as f64, r.qps)], qps_colour.filled())
    });
    let swatch = |c: RGBColor| {
        move |(x, y): (i32, i32)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled())
    };
    chart.draw_series(bars).map_err(e)?.label("llm-loadgen QPS").legend(swatch(qps_colour));
    let ceilings = rows.iter().enumerate().filter_map(|(i, r)| {
        r.ceiling_qps.map(|c| {
            Rectangle::new([(i as f64, 0.0), (i as f64 + 0.38, c)], ceiling_colour.filled())
        })
    });
    chart
        .draw_series(ceilings)
        .map_err(e)?
        .label("raw ceiling (same cores)")
        .legend(swatch(ceiling_colour));
    for (i, r) in rows.iter().enumerate() {
        let ratio = r.ceiling_qps.filter(|c| *c > 0.0).map(|c| format!(" ({:.2})", r.qps / c));
        let text = format!("{:.0}{}", r.qps, ratio.unwrap_or_default());
        let label =
            Text::new(text, (i as f64 - 0.38, r.qps + top * 0.03), ("sans-serif", 12).into_font());
        chart.draw_series(std::iter::once(label)).map_err(e)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(e)?;
    Ok(())
}

/// One line per row: QPS against the client's worker count.
fn draw_workers(
    by_workers: &BTreeMap<String, Vec<(usize, f64)>>,
    caption: &str,
    area: &Area<'_>,
) -> anyhow::Result<()> {
    let e = |e: DrawingAreaErrorKind<_>| anyhow::anyhow!("{e}");
    let points = by_workers.values().flatten();
    let max_workers = points.clone().map(|p| p.0).max().unwrap_or(1);
    let top = points.map(|p| p.1).fold(1.0, f64::max);
    let mut chart = ChartBuilder::on(area)
        .caption(format!("Roofline: QPS per client worker count ({caption})"), ("sans-serif", 18))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..max_workers as f64 + 0.5, 0f64..top * 1.15)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("llm-loadgen workers")
        .y_desc("QPS")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(e)?;
    for (i, (name, points)) in by_workers.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let xy: Vec<(f64, f64)> = points.iter().map(|&(w, q)| (w as f64, q)).collect();
        chart
            .draw_series(LineSeries::new(xy.iter().copied(), colour.stroke_width(2)))
            .map_err(e)?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        chart.draw_series(xy.iter().map(|&p| Circle::new(p, 4, colour.filled()))).map_err(e)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(e)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, stream: bool, qps: f64, workers: Option<usize>) -> Row {
        Row { row: name.into(), stream, qps, ceiling_qps: None, client_workers: workers }
    }

    #[test]
    fn rows_group_by_series_in_worker_order_and_rows_without_a_count_drop_out() {
        let rows = [
            row("burst", false, 40.0, Some(2)),
            row("burst", false, 20.0, Some(1)),
            row("burst", true, 15.0, Some(1)),
            row("c1000", false, 9.0, None),
        ];
        let got = qps_by_workers(&rows);
        assert_eq!(got["burst off"], vec![(1, 20.0), (2, 40.0)]);
        assert_eq!(got["burst stream"], vec![(1, 15.0)]);
        assert!(!got.contains_key("c1000 off"));
    }

    #[test]
    fn an_old_roofline_json_without_worker_counts_reads() {
        let text = r#"{"rows": [{"row": "burst", "label": "x", "stream": false, "qps": 5.0,
            "ceiling_qps": null, "error": null}]}"#;
        let r: Roofline = serde_json::from_str(text).unwrap();
        assert_eq!((r.rows[0].client_workers, r.rows[0].ceiling_qps), (None, None));
        assert!(r.host.is_none());
    }
}
